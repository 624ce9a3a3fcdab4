"""Runs in a fresh process: ``python host_paths.py DEVICE`` runs int32 shape arithmetic (served on
a unidev device by TF's CPU kernels in host memory) eagerly and in a tf.function, and copies of
several dtypes host -> device -> host, and prints one JSON line: case -> values and the device of
the result, or the error class."""

from __future__ import annotations

import json
import sys

import numpy as np
import tensorflow as tf

dev = sys.argv[1]
rng = np.random.default_rng(0)
m = tf.constant(rng.integers(-9, 9, (3, 4, 5)).astype(np.int32))
v = tf.constant(np.array([3, 4, 5], np.int32))
raw = tf.raw_ops
CASES = {
    "strided_slice": lambda: m[1:, ::-2, 3],
    "strided_slice_masks": lambda: m[..., tf.newaxis, 1:4:2],
    "strided_slice_grad": lambda: raw.StridedSliceGrad(
        shape=v, begin=[0, 1, 0], end=[3, 4, 5], strides=[1, 2, 2], dy=m[:, 1::2, ::2]),
    "pack": lambda: tf.stack([v, v * 2, v - 1], axis=1),
    "prod": lambda: tf.reduce_prod(v),
    "sum_keep": lambda: tf.reduce_sum(m, axis=[0, 2], keepdims=True),
    "cumsum": lambda: tf.cumsum(m, axis=1, exclusive=True, reverse=True),
    "transpose": lambda: tf.transpose(m, [2, 0, 1]),
    "tile": lambda: tf.tile(v, [3]),
    "broadcast_to": lambda: tf.broadcast_to(v, [2, 3]),
    "gather": lambda: tf.gather(m, [2, 0], axis=1),
    "select": lambda: tf.where(m > 0, m, -m),
    "truncate_div": lambda: raw.TruncateDiv(x=m, y=tf.constant(-2, tf.int32)),
    "bad_gather": lambda: tf.gather(v, [7]),
    "bad_slice": lambda: m[5],
}
COPIES = {"float32[1M]": rng.normal(size=1 << 20).astype(np.float32),
          "float64[3,4]": rng.normal(size=(3, 4)), "int64[17]": rng.integers(-9, 9, 17),
          "int32[5]": np.arange(5, dtype=np.int32), "bool[7]": rng.integers(0, 2, 7) > 0,
          "float32[0]": np.zeros(0, np.float32), "scalar": np.float32(2.5)}


def run(fn) -> dict:
    try:
        with tf.device(dev):
            y = fn()
        return {"value": y.numpy().tolist(), "device": y.device}
    except Exception as exc:  # the error class is the result
        return {"error": type(exc).__name__}


res: dict = {"eager": {k: run(f) for k, f in CASES.items()},
             "function": {k: run(tf.function(f)) for k, f in CASES.items() if "bad" not in k},
             "copies": {}}
for name, x in COPIES.items():
    cpu = tf.constant(x)
    with tf.device(dev):
        on = tf.identity(cpu) * 1 if x.dtype != bool else tf.logical_not(tf.identity(cpu))
        back = tf.constant(x)
    res["copies"][name] = {"value": on.numpy().tolist(), "const": back.numpy().tolist(),
                           "device": on.device}
print("RESULT " + json.dumps(res))
