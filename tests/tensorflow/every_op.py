"""Runs in a fresh process: ``python every_op.py DEVICE`` runs a sample of every TF op the
adapter table lists (every registered dtype), the bad-input cases and the window-attribute grid
on DEVICE and prints one JSON line: case -> values or error class, plus the adapter's kernel
registrations checked against the ops' real definitions."""

# ruff: noqa: B023 -- each lambda is called at once, inside its loop iteration
from __future__ import annotations

import itertools
import json
import sys

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import kernels, op_def_registry

from unidev.adapters.tensorflow import ops

raw = tf.raw_ops
rng = np.random.default_rng(0)
NP = {"float32": np.float32, "float64": np.float64, "int32": np.int32, "int64": np.int64,
      "bool": np.bool_}


def val(dt: str, *shape: int, lo: float = 0.5, hi: float = 2.0) -> tf.Tensor:
    if dt == "bool":
        return tf.constant(rng.integers(0, 2, shape).astype(bool))
    if dt.startswith("int"):
        return tf.constant(rng.integers(1, 5, shape).astype(NP[dt]))
    return tf.constant(rng.uniform(lo, hi, shape).astype(NP[dt]))


def img(dt: str) -> tf.Tensor:
    return val(dt, 2, 6, 5, 3)


# Arguments of one call per op; unary and binary ops get x (and y) of shape (2, 3).
SPECIAL = {
    "_EagerConst": lambda d: dict(input=val(d, 2, 3)),
    "Softmax": lambda d: dict(logits=val(d, 2, 3)),
    "LogSoftmax": lambda d: dict(logits=val(d, 2, 3)),
    "Relu": lambda d: dict(features=val(d, 2, 3, lo=-1)),
    "StopGradient": lambda d: dict(input=val(d, 2, 3)),
    "Snapshot": lambda d: dict(input=val(d, 2, 3)),
    "ReluGrad": lambda d: dict(gradients=val(d, 2, 3), features=val(d, 2, 3, lo=-1)),
    "SigmoidGrad": lambda d: dict(y=val(d, 2, 3), dy=val(d, 2, 3)),
    "TanhGrad": lambda d: dict(y=val(d, 2, 3), dy=val(d, 2, 3)),
    "RsqrtGrad": lambda d: dict(y=val(d, 2, 3), dy=val(d, 2, 3)),
    "SqrtGrad": lambda d: dict(y=val(d, 2, 3), dy=val(d, 2, 3)),
    "SelectV2": lambda d: dict(condition=val("bool", 2, 3), t=val(d, 2, 3), e=val(d, 1, 3)),
    "Select": lambda d: dict(condition=val("bool", 2, 3), t=val(d, 2, 3), e=val(d, 2, 3)),
    "AddN": lambda d: dict(inputs=[val(d, 2, 3), val(d, 2, 3), val(d, 2, 3)]),
    "BiasAdd": lambda d: dict(value=val(d, 2, 3), bias=val(d, 3)),
    "BiasAddGrad": lambda d: dict(out_backprop=val(d, 2, 3)),
    "MatMul": lambda d: dict(a=val(d, 2, 3), b=val(d, 3, 4), transpose_a=False),
    "BatchMatMulV2": lambda d: dict(x=val(d, 2, 2, 3), y=val(d, 3, 4)),
    "BatchMatMulV3": lambda d: dict(x=val(d, 2, 2, 3), y=val(d, 3, 4), Tout=tf.as_dtype(d)),
    "BroadcastTo": lambda d: dict(input=val(d, 3), shape=tf.constant([2, 3], tf.int64)),
    "Tile": lambda d: dict(input=val(d, 2, 3), multiples=[2, 1]),
    "Fill": lambda d: dict(dims=tf.constant([2, 3], tf.int64), value=val(d)),
    "Transpose": lambda d: dict(x=val(d, 2, 3, 4), perm=[2, 0, 1]),
    "SparseSoftmaxCrossEntropyWithLogits": lambda d: dict(
        features=val(d, 3, 4), labels=tf.constant([0, 3, 1], tf.int64)),
    "Conv2D": lambda d: dict(input=img(d), filter=val(d, 2, 2, 3, 4), strides=[1, 2, 1, 1],
                             padding="SAME"),
    "Conv2DBackpropInput": lambda d: dict(input_sizes=[2, 6, 5, 3], filter=val(d, 2, 2, 3, 4),
                                          out_backprop=val(d, 2, 5, 4, 4), strides=[1, 1, 1, 1],
                                          padding="VALID"),
    "Conv2DBackpropFilter": lambda d: dict(input=img(d), filter_sizes=[2, 2, 3, 4],
                                           out_backprop=val(d, 2, 5, 4, 4), strides=[1, 1, 1, 1],
                                           padding="VALID"),
    "MaxPool": lambda d: dict(input=img(d), ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1],
                              padding="SAME"),
    "AvgPool": lambda d: dict(value=img(d), ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1],
                              padding="VALID"),
    "MaxPoolGrad": lambda d: dict(orig_input=img(d), orig_output=raw.MaxPool(
        input=img(d), ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID"),
        grad=val(d, 2, 3, 2, 3), ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID"),
    "AvgPoolGrad": lambda d: dict(orig_input_shape=[2, 6, 5, 3], grad=val(d, 2, 3, 2, 3),
                                  ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID"),
    "DepthwiseConv2dNative": lambda d: dict(input=img(d), filter=val(d, 2, 2, 3, 2),
                                            strides=[1, 1, 1, 1], padding="SAME"),
    "DepthwiseConv2dNativeBackpropInput": lambda d: dict(
        input_sizes=[2, 6, 5, 3], filter=val(d, 2, 2, 3, 2), out_backprop=val(d, 2, 5, 4, 6),
        strides=[1, 1, 1, 1], padding="VALID"),
    "DepthwiseConv2dNativeBackpropFilter": lambda d: dict(
        input=img(d), filter_sizes=[2, 2, 3, 2], out_backprop=val(d, 2, 5, 4, 6),
        strides=[1, 1, 1, 1], padding="VALID"),
    # Their reserve-space placeholders differ between TF CPU's kernels (oneDNN's [0], Eigen's
    # [] or unset values): the refusal is compared here; tests/tensorflow/test_channels_last.py
    # compares what the ops compute (forward, statistics, gradient) through tf.nn.
    "FusedBatchNormV3": lambda d: dict(x=img(d), scale=val(d, 4), offset=val(d, 3),
                                       mean=val(d, 3), variance=val(d, 3), is_training=True,
                                       exponential_avg_factor=0.5),
    "FusedBatchNormGradV3": lambda d: dict(y_backprop=val(d, 2, 6, 5, 2), x=img(d),
                                           scale=val(d, 3), reserve_space_1=val(d, 3),
                                           reserve_space_2=val(d, 3), reserve_space_3=val(d, 0)),
    "Pad": lambda d: dict(input=val(d, 2, 3), paddings=[[1, 0], [0, 2]]),
    "Slice": lambda d: dict(input=val(d, 3, 4), begin=[1, 1], size=[2, -1]),
    "Relu6": lambda d: dict(features=val(d, 2, 3, lo=-1, hi=8)),
    "Relu6Grad": lambda d: dict(gradients=val(d, 2, 3), features=val(d, 2, 3, lo=-1, hi=8)),
    # tier 3: both signs
    "Elu": lambda d: dict(features=val(d, 2, 3, lo=-2)),
    "Selu": lambda d: dict(features=val(d, 2, 3, lo=-2)),
    "EluGrad": lambda d: dict(gradients=val(d, 2, 3), outputs=val(d, 2, 3, lo=-0.9, hi=2)),
    "Softplus": lambda d: dict(features=val(d, 2, 3, lo=-3, hi=3)),
    "SoftplusGrad": lambda d: dict(gradients=val(d, 2, 3), features=val(d, 2, 3, lo=-3, hi=3)),
    "Expm1": lambda d: dict(x=val(d, 2, 3, lo=-2)),
    "FloorDiv": lambda d: dict(x=val(d, 2, 3, lo=-5, hi=5), y=val(d, 2, 3)),
    "FloorMod": lambda d: dict(x=val(d, 2, 3, lo=-5, hi=5), y=val(d, 1, 3, lo=-2, hi=-0.5)),
    "Xlogy": lambda d: dict(x=val(d, 2, 3, lo=-1), y=val(d, 2, 3)),
}
REDUCE = {"Sum", "Mean", "Max", "Min", "Prod", "ArgMax", "ArgMin"}


def args_for(op: ops.TfOp, dt: str) -> dict:
    if op.tf in SPECIAL:
        return SPECIAL[op.tf](dt)
    if op.tf in REDUCE:
        axis = "dimension" if op.tf.startswith("Arg") else "axis"
        return {"input": val(dt, 2, 3), axis: tf.constant(1, tf.int64)}
    if op.tf == "Cast":
        return dict(x=val(dt, 2, 3), DstT=tf.float32)
    inputs = op_def_registry.get(op.tf).input_arg
    return {a.name: val(dt, 2, 3) for a in inputs}


def outcome(fn) -> object:
    try:
        out = fn()
        outs = out if isinstance(out, (list, tuple)) else [out]
        return [np.asarray(o).astype(np.float64).tolist() for o in outs]
    except Exception as exc:
        return {"error": type(exc).__name__, "message": str(exc)[:300]}


def every_op(device: str) -> dict:
    res = {}
    for op in ops.TF_OPS:
        for dt in op.dtypes:
            if dt == "int32" and op.tf != "Cast":
                continue  # int32 stays in host memory: TF's CPU kernels serve it everywhere
            with tf.device(device):
                res[f"{op.tf}:{dt}"] = outcome(
                    lambda op=op, dt=dt: getattr(raw, op.tf)(**args_for(op, dt)))
    return res


def bad_inputs(device: str) -> dict:
    with tf.device(device):
        v = tf.Variable(tf.zeros((3, 4)))
        cases = {
            "assign_add_shape": lambda: v.assign_add(tf.ones((4,))),
            "assign_sub_shape": lambda: v.assign_sub(tf.ones((4, 3))),
            "apply_gradients_shape": lambda: tf.keras.optimizers.SGD(0.1).apply_gradients(
                [(tf.ones((4,)), v)]),
            "descent_shape": lambda: raw.ResourceApplyGradientDescent(
                var=v.handle, alpha=tf.constant(0.1), delta=tf.ones((2, 2))),
            "zeros_negative": lambda: tf.zeros([-1, 3]),
            "fill_negative": lambda: tf.fill([3, -2], 1.0),
            "fill_huge": lambda: tf.fill([2**40, 2**40], 1.0),
            "broadcast_to_negative": lambda: tf.broadcast_to(tf.ones(3), [-1, 3]),
            "tile_negative": lambda: tf.tile(tf.ones((2, 3)), [1, -2]),
            "tile_huge": lambda: tf.tile(tf.ones((2, 3)), [2**62, 2]),
            "conv_bi_negative": lambda: raw.Conv2DBackpropInput(
                input_sizes=[2, -6, 5, 3], filter=tf.ones((2, 2, 3, 4)),
                out_backprop=tf.ones((2, 5, 4, 4)), strides=[1, 1, 1, 1], padding="VALID"),
            "conv_bf_negative": lambda: raw.Conv2DBackpropFilter(
                input=tf.ones((2, 6, 5, 3)), filter_sizes=[2, -2, 3, 4],
                out_backprop=tf.ones((2, 5, 4, 4)), strides=[1, 1, 1, 1], padding="VALID"),
            "avg_pool_grad_negative": lambda: raw.AvgPoolGrad(
                orig_input_shape=[2, -6, 5, 3], grad=tf.ones((2, 3, 2, 3)), ksize=[1, 2, 2, 1],
                strides=[1, 2, 2, 1], padding="VALID"),
        }
        out = {name: outcome(fn) for name, fn in cases.items()}
        out["variable_after"] = v.numpy().tolist()
    return out


X = np.random.default_rng(1).uniform(size=(2, 6, 6, 4)).astype(np.float32)
F = np.random.default_rng(2).uniform(size=(2, 2, 4, 4)).astype(np.float32)
POOL_WINDOWS = [([1, 2, 2, 1], [1, 1, 1, 1]), ([2, 2, 2, 1], [1, 1, 1, 1]),
                ([1, 2, 2, 1], [2, 1, 1, 1]), ([1, 2, 2, 2], [1, 1, 1, 1]),
                ([1, 2, 2, 1], [1, 1, 1, 2]), ([1, 3, 2, 1], [1, 2, 1, 1]),
                ([1, 1, 1, 2], [1, 1, 1, 1]), ([1, 1, 1, 3], [1, 1, 1, 3]),
                ([1, 2, 2, 1], [1, 0, 1, 1]), ([1, -1, 2, 1], [1, 1, 1, 1]),
                ([1, 9, 2, 1], [1, 1, 1, 1])]
CONV_WINDOWS = [([1, 1, 1, 1], [1, 1, 1, 1]), ([2, 1, 1, 1], [1, 1, 1, 1]),
                ([1, 1, 1, 2], [1, 1, 1, 1]), ([1, 2, 1, 1], [1, 1, 1, 1]),
                ([1, 0, 1, 1], [1, 1, 1, 1]), ([1, -1, 1, 1], [1, 1, 1, 1]),
                ([1, 1, 1], [1, 1, 1, 1]), ([1, 1, 1, 1], [2, 1, 1, 1]),
                ([1, 1, 1, 1], [1, 1, 1, 2]), ([1, 1, 1, 1], [1, 0, 1, 1]),
                ([1, 1, 1, 1], [1, 1, 1])]
PADS = {"valid": dict(padding="VALID"), "same": dict(padding="SAME"),
        "explicit": dict(padding="EXPLICIT", explicit_paddings=[0, 0, 1, 0, 1, 1, 0, 0]),
        "explicit_batch": dict(padding="EXPLICIT", explicit_paddings=[1, 0, 1, 1, 1, 1, 0, 0]),
        "explicit_depth": dict(padding="EXPLICIT", explicit_paddings=[0, 0, 1, 1, 1, 1, 0, 1]),
        "explicit_negative": dict(padding="EXPLICIT", explicit_paddings=[0, 0, -1, 1, 1, 1, 0, 0]),
        "explicit_short": dict(padding="EXPLICIT", explicit_paddings=[0, 0, 1, 1]),
        "valid_with_pads": dict(padding="VALID", explicit_paddings=[0, 0, 1, 1, 1, 1, 0, 0])}


def windows(device: str) -> dict:
    """Strides, ksize, dilations and paddings of conv and pooling, valid and not."""
    x, f = tf.constant(X), tf.constant(F)
    res = {}
    with tf.device(device):
        for (ks, st), pad in itertools.product(POOL_WINDOWS, ("VALID", "SAME")):
            key = f"{ks}{st}{pad}"
            y = raw.MaxPool(input=x, ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], padding="VALID") \
                if ks == [1, 2, 2, 1] and st == [1, 1, 1, 1] and pad == "VALID" else None
            res["MaxPool" + key] = outcome(lambda: raw.MaxPool(input=x, ksize=ks, strides=st,
                                                               padding=pad))
            res["AvgPool" + key] = outcome(lambda: raw.AvgPool(value=x, ksize=ks, strides=st,
                                                               padding=pad))
            if y is not None:  # the gradients' shape checks need a consistent forward
                res["MaxPoolGrad" + key] = outcome(lambda: raw.MaxPoolGrad(
                    orig_input=x, orig_output=y, grad=y * 2, ksize=ks, strides=st, padding=pad))
                res["MaxPoolGrad_bad_grad" + key] = outcome(lambda: raw.MaxPoolGrad(
                    orig_input=x, orig_output=y, grad=y[:, 1:], ksize=ks, strides=st,
                    padding=pad))
            if min(ks) > 0:  # TF 2.21's CPU MaxPoolGrad corrupts its heap on ksize -1 (SAME)
                res["MaxPoolGrad_attrs" + key] = outcome(lambda: raw.MaxPoolGrad(
                    orig_input=x, orig_output=x, grad=x, ksize=ks, strides=st, padding=pad))
        for name, kw in PADS.items():
            if name != "valid_with_pads":  # MaxPool's own check differs from TF's conv check
                res["MaxPool_" + name] = outcome(lambda: raw.MaxPool(
                    input=x, ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], **kw))
        res["MaxPool_explicit_too_big"] = outcome(lambda: raw.MaxPool(
            input=x, ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], padding="EXPLICIT",
            explicit_paddings=[0, 0, 2, 0, 0, 0, 0, 0]))
        for (st, dil), (pname, kw) in itertools.product(CONV_WINDOWS, PADS.items()):
            if pname not in ("valid", "same") and st != [1, 1, 1, 1]:
                continue
            key = f"{st}{dil}{pname}"
            res["Conv2D" + key] = outcome(lambda: raw.Conv2D(input=x, filter=f, strides=st,
                                                             dilations=dil, **kw))
            if dil != [1, 1, 1, 1]:
                continue  # TF's CPU gradients take no dilations at all: the device computes them
            out = outcome(lambda: raw.Conv2D(input=x, filter=f, strides=[1, 1, 1, 1], **kw)) \
                if st == [1, 1, 1, 1] else None
            grad = tf.ones(np.asarray(out[0]).shape) if isinstance(out, list) else \
                tf.ones((2, 5, 5, 4))
            res["Conv2DBackpropInput" + key] = outcome(lambda: raw.Conv2DBackpropInput(
                input_sizes=[2, 6, 6, 4], filter=f, out_backprop=grad, strides=st, **kw))
            res["Conv2DBackpropFilter" + key] = outcome(lambda: raw.Conv2DBackpropFilter(
                input=x, filter_sizes=[2, 2, 4, 4], out_backprop=grad, strides=st, **kw))
            res["Conv2DBackpropInput_bad_grad" + key] = outcome(lambda: raw.Conv2DBackpropInput(
                input_sizes=[2, 6, 6, 4], filter=f, out_backprop=grad[:, 1:], strides=st, **kw))
            res["Conv2DBackpropFilter_bad_grad" + key] = outcome(
                lambda: raw.Conv2DBackpropFilter(input=x, filter_sizes=[2, 2, 4, 4],
                                                 out_backprop=grad[:, :, 1:], strides=st, **kw))
        res["Conv2D_depth"] = outcome(lambda: raw.Conv2D(
            input=x, filter=tf.ones((2, 2, 3, 4)), strides=[1, 1, 1, 1], padding="VALID"))
    return res


def registrations(types: list[str]) -> list[str]:
    """Each unidev kernel's constraints and host-memory args against the op's definition."""
    problems = []
    names = {op.tf for op in ops.TF_OPS} | {"AssignAddVariableOp", "AssignSubVariableOp",
                                             "ResourceApplyGradientDescent"}
    for name in sorted(names):
        op_def = op_def_registry.get(name)
        attrs = {a.name: a for a in op_def.attr}
        args = {a.name for a in list(op_def.input_arg) + list(op_def.output_arg)}
        for k in kernels.get_registered_kernels_for_op(name).kernel:
            if k.device_type not in types:
                continue
            constrained = {c.name for c in k.constraint}
            for c in k.constraint:
                a = attrs.get(c.name)
                if a is None or a.type != "type":
                    problems.append(f"{name} on {k.device_type}: constraint on {c.name}")
                elif a.allowed_values.list.type and not set(c.allowed_values.list.type) <= set(
                        a.allowed_values.list.type):
                    problems.append(f"{name} on {k.device_type}: {c.name} dtype not allowed")
            for a in op_def.attr:
                if a.type == "type" and a.name not in constrained and \
                        len(a.allowed_values.list.type) != 1:
                    problems.append(f"{name} on {k.device_type}: {a.name} unconstrained")
            problems += [f"{name} on {k.device_type}: host arg {h}" for h in k.host_memory_arg
                         if h not in args]
    return problems


if __name__ == "__main__":
    device = sys.argv[1]
    types = [d.device_type for d in tf.config.list_physical_devices() if d.device_type != "CPU"]
    result = {"types": types, "registrations": registrations(types),
              "ops": every_op(device), "bad": bad_inputs(device), "windows": windows(device)}
    print("RESULT " + json.dumps(result))
