"""Runs in a fresh process (TF's placement log must be set before its context starts):
``python scenario.py ops|train DEVICE_TYPE`` prints one JSON line of measurements."""

from __future__ import annotations

import json
import sys

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)


def r(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


X, Y, B = r(4, 5), r(4, 5), r(5)
IMG, K3, K2 = r(2, 9, 7, 3), r(3, 3, 3, 4), r(2, 2, 3, 4)
LOGITS, LABELS = r(6, 5), rng.integers(0, 5, 6).astype(np.int32)
BM1, BM2, BIG = r(2, 3, 4), r(1, 4, 2), r(300, 700)


def grads(f, *xs):
    xs = [tf.constant(x) for x in xs]
    with tf.GradientTape() as tape:
        for x in xs:
            tape.watch(x)
        y = f(*xs)
        loss = tf.reduce_sum(y * y)
    return [y, *tape.gradient(loss, xs)]


CASES = {
    "add_broadcast": lambda: tf.add(X, B),
    "sub": lambda: tf.subtract(X, Y), "mul": lambda: tf.multiply(X, Y),
    # same shapes take the C++ kernels, other shapes their C fallback
    "add_f64": lambda: tf.add(X.astype(np.float64), Y.astype(np.float64)),
    "mul_broadcast": lambda: tf.multiply(B, X), "sub_scalar": lambda: tf.subtract(X, 2.0),
    "realdiv": lambda: tf.divide(X, Y * Y + 1),
    "maximum": lambda: tf.maximum(X, Y), "minimum": lambda: tf.minimum(X, B),
    "pow": lambda: tf.pow(tf.abs(X) + 0.5, Y), "neg": lambda: tf.negative(X),
    "abs": lambda: tf.abs(X),
    "exp": lambda: tf.exp(X), "log": lambda: tf.math.log(tf.abs(X) + 1),
    "sqrt": lambda: tf.sqrt(X * X),
    "rsqrt": lambda: tf.math.rsqrt(X * X + 1), "tanh": lambda: tf.tanh(X),
    "sigmoid": lambda: tf.sigmoid(X), "relu": lambda: tf.nn.relu(X), "square": lambda: tf.square(X),
    "sum_axis1_keep": lambda: tf.reduce_sum(X, axis=1, keepdims=True),
    "mean_all": lambda: tf.reduce_mean(X), "max_axis0": lambda: tf.reduce_max(X, axis=0),
    "sum_neg_axes": lambda: tf.reduce_sum(IMG, axis=[-1, 1]),
    "argmax": lambda: tf.argmax(X, axis=1), "matmul_tb": lambda: tf.matmul(X, Y, transpose_b=True),
    "batch_matmul": lambda: tf.matmul(BM1, BM2),
    "softmax": lambda: tf.nn.softmax(X), "log_softmax": lambda: tf.nn.log_softmax(X),
    "bias_add": lambda: tf.nn.bias_add(X, B), "cast_int32": lambda: tf.cast(LABELS, tf.float32),
    "cast_to_int64": lambda: tf.cast(X * 3, tf.int64), "equal": lambda: tf.equal(X, X * (X > 0)),
    "select": lambda: tf.where(X > 0, X, Y), "add_n": lambda: tf.add_n([X, Y, X, Y]),
    "tile": lambda: tf.tile(X, [2, 3]), "broadcast_to": lambda: tf.broadcast_to(B, (3, 4, 5)),
    "fill": lambda: tf.fill((2, 3), tf.constant(2.5)),
    "transpose": lambda: tf.transpose(IMG, [3, 1, 0, 2]),
    "zeros_like": lambda: tf.zeros_like(X), "ones_like": lambda: tf.ones_like(X),
    "squared_difference": lambda: tf.math.squared_difference(X, B),
    "div_no_nan": lambda: tf.math.divide_no_nan(X, Y * (Y > 0)),
    "sparse_xent": lambda: grads(lambda z: tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=LABELS, logits=z), LOGITS),
    # int64 labels live in device memory (int32 ones in host memory): the kernel reads them back
    "sparse_xent_int64": lambda: grads(lambda z: tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=LABELS.astype(np.int64), logits=z), LOGITS),
    "conv_same_s1": lambda: grads(lambda x, k: tf.nn.conv2d(x, k, 1, "SAME"), IMG, K3),
    "conv_same_s2_asym": lambda: grads(lambda x, k: tf.nn.conv2d(x, k, 2, "SAME"), IMG, K2),
    "conv_valid_dil": lambda: tf.nn.conv2d(IMG, K3, 1, "VALID", dilations=2),
    "conv_valid_s2": lambda: grads(lambda x, k: tf.nn.conv2d(x, k, 2, "VALID"), IMG, K3),
    "max_pool_same": lambda: grads(lambda x: tf.nn.max_pool2d(x, 3, 2, "SAME"), IMG),
    "max_pool_valid": lambda: grads(lambda x: tf.nn.max_pool2d(x, 2, 2, "VALID"), IMG),
    "avg_pool_same": lambda: grads(lambda x: tf.nn.avg_pool2d(x, 2, 2, "SAME"), IMG),
    "constants": lambda: [tf.constant(v) for v in (
        X, X.astype(np.float64), LABELS.astype(np.int64), X > 0, np.float32(2.5),
        np.zeros((0, 3), np.float32), BIG)],
    "relu_tanh_sigmoid_grads": lambda: grads(lambda x: tf.nn.relu(x) + tf.tanh(x) * tf.sigmoid(x)
                                             + tf.sqrt(x * x + 1) + tf.math.rsqrt(x * x + 1), X),
}


@tf.function
def traced(x, y, k):
    with tf.GradientTape() as tape:
        tape.watch(k)
        h = tf.nn.relu(tf.nn.conv2d(x, k, 1, "SAME"))
        loss = tf.reduce_mean(tf.square(h)) + tf.reduce_sum(tf.matmul(y, y, transpose_a=True))
    return loss, tape.gradient(loss, k)


def run_on(device: str, fn):
    with tf.device(device):
        out = fn()
    outs = out if isinstance(out, (list, tuple)) else [out]
    return [np.asarray(o) for o in outs], outs[0].device


def ops(device: str) -> dict:
    res: dict = {"cases": {}}
    cases = dict(CASES, tf_function=lambda: traced(IMG, X, K3))
    for name, fn in cases.items():
        want, _ = run_on("/device:CPU:0", fn)
        try:
            got, where = run_on(device, fn)
            # error relative to the output's magnitude
            diff = max(float(np.max(np.abs(g.astype(np.float64) - w), initial=0))
                       / (1.0 + float(np.max(np.abs(w.astype(np.float64)), initial=0)))
                       for g, w in zip(got, want, strict=True))
            res["cases"][name] = {"diff": diff, "device": where}
        except Exception as exc:
            res["cases"][name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    from tensorflow.python.framework import kernels

    dev_type = device.split(":")[1]  # which kernel serves eager tf.constant on the device
    res["eager_const"] = sorted(
        (k.constraint[0].allowed_values.list.type[0], list(k.host_memory_arg))
        for k in kernels.get_registered_kernels_for_op("_EagerConst").kernel
        if k.device_type == dev_type)
    res["addv2_priorities"] = sorted({  # the same-shape C++ kernel above the C one
        k.priority for k in kernels.get_registered_kernels_for_op("AddV2").kernel
        if k.device_type == dev_type})
    res["cast_from_int32"] = [  # int32 is host memory: the Cast stages it, not TF's EventMgr copy
        list(k.host_memory_arg) for k in kernels.get_registered_kernels_for_op("Cast").kernel
        if k.device_type == dev_type and any(
            c.name == "SrcT" and c.allowed_values.list.type[0] == 3 for c in k.constraint)]
    res["errors"] = {}
    bad = {
        "broadcast": lambda: tf.add(tf.ones(3), tf.ones(4)),
        "matmul": lambda: tf.matmul(tf.ones((2, 3)), tf.ones((4, 2))),
        "label": lambda: tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.constant([7], tf.int32), logits=tf.ones((1, 5))),
        "label64": lambda: tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.constant([0, -3], tf.int64), logits=tf.ones((2, 5))),
    }
    for name, fn in bad.items():
        try:
            with tf.device(device):
                np.asarray(fn())
            res["errors"][name] = "no error"
        except Exception as exc:
            res["errors"][name] = f"{type(exc).__name__}: {exc}"[:300]
    with tf.device(device):
        try:
            big = tf.zeros((1 << 40,), tf.float32)
            res["oom"] = f"allocated {big.shape}"
        except tf.errors.ResourceExhaustedError as exc:
            res["oom"] = "ResourceExhaustedError: " + str(exc)[:100]
        res["after_oom"] = float(tf.reduce_sum(tf.ones((1000,))))
    with tf.device(device):  # the C++ variable-update kernels
        v = tf.Variable(np.arange(6, dtype=np.float32))
        v.assign_add(tf.ones(6))
        v.assign_sub(tf.fill((6,), 0.5))
        tf.raw_ops.ResourceApplyGradientDescent(var=v.handle, alpha=tf.constant(0.1),
                                                delta=tf.ones(6))
        step = tf.Variable(np.int64(3))
        step.assign_add(np.int64(2))
    res["variables"] = {"v": v.numpy().tolist(), "step": int(step.numpy()),
                        "device": v.handle.device}
    import keras  # unchanged model code: compile() defaults (jit_compile="auto")

    with tf.device(device):
        model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(2)])
        model.compile("sgd", "mse")
        res["keras_default_fit"] = model.fit(X, X[:, :2], epochs=1, verbose=0).history["loss"]
        res["keras_jit"] = model.jit_compile
    res["memory"] = tf.config.experimental.get_memory_info(device.split("device:")[1])
    physical = tf.config.list_physical_devices(device.split(":")[1])
    res["devices"] = len(physical)
    if len(physical) > 1:  # a value made on one device, used on another
        with tf.device(device):
            a = tf.constant([1.0, 2.0]) * 3
        with tf.device(device[:-1] + "1"):
            b = a + 1
        res["second_device"] = {"value": b.numpy().tolist(), "device": b.device}
    return res


def train(device: str, variants: list[str]) -> dict:
    from unidev.demos import tf_train as tr

    out = {}
    for v in variants:
        kind, opt = v.split("-")
        out[v] = tr.compare([device], kind, opt, placement=True)
    return out


if __name__ == "__main__":
    mode, dev_type = sys.argv[1], sys.argv[2]
    device = f"/device:{dev_type}:0"
    if mode == "train":
        tf.debugging.set_log_device_placement(True)
        result = train(device, sys.argv[3].split(","))
    else:
        result = ops(device)
    print("RESULT " + json.dumps(result))
