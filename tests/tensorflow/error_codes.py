"""Runs in a fresh process: ``python error_codes.py DEVICE [NAME TF_TYPE LIBRARY]`` prints one
JSON line: the TF error class of each reachable bad input on DEVICE, and with a plugin NAME
registered (abi10_shim.c), of float32 Neg and AddV2 whose kernel fails with each error code."""

from __future__ import annotations

import json
import sys

import numpy as np

from unidev.core import discovery

if len(sys.argv) > 4:
    from unidev.kit import PluginSpec, hookimpl

    class Plugin:
        @hookimpl
        def unidev_plugin(self) -> PluginSpec:
            return PluginSpec(name=sys.argv[2], tf_type=sys.argv[3], library=sys.argv[4])

    discovery.register(Plugin(), sys.argv[2])

import tensorflow as tf  # noqa: E402

raw = tf.raw_ops
f32 = np.float32
BAD = {  # one per kind TF's own kernels raise too
    "broadcast": lambda: raw.AddV2(x=tf.ones([2, 3]), y=tf.ones([4])),
    "label": lambda: raw.SparseSoftmaxCrossEntropyWithLogits(
        features=tf.ones([2, 3]), labels=tf.constant([0, 7], tf.int64)),
    "huge": lambda: raw.Fill(dims=tf.constant([2**40], tf.int64), value=tf.constant(1.0)),
    "conv_batch_stride": lambda: raw.Conv2D(input=tf.ones([1, 4, 4, 1]), filter=tf.ones(
        [2, 2, 1, 1]), strides=[2, 1, 1, 1], padding="VALID"),
}


def outcome(fn) -> dict:
    try:
        y = fn()
        y = y[0] if isinstance(y, (list, tuple)) else y
        return {"value": np.asarray(y).tolist()}
    except Exception as exc:  # the error class is the result
        return {"error": type(exc).__name__, "message": str(exc)[:1000]}


res: dict = {"bad": {}, "codes": {}}
with tf.device(sys.argv[1]):
    for name, fn in BAD.items():
        if name != "huge" or "CPU" not in sys.argv[1]:  # TF CPU might get 4 TiB of address space
            res["bad"][name] = outcome(fn)
if len(sys.argv) > 4:
    with tf.device(f"/device:{sys.argv[3]}:0"):
        for code in range(1, 9):
            x = np.zeros(code, f32)
            res["codes"][f"Neg:{code}"] = outcome(lambda x=x: raw.Neg(x=tf.constant(x)))
            res["codes"][f"AddV2:{code}"] = outcome(lambda x=x: raw.AddV2(x=tf.constant(x),
                                                                      y=tf.constant(x)))
print("RESULT " + json.dumps(res))
