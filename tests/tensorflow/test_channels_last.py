"""TF's NHWC on unidev devices: a Keras channels_last step matches TF CPU with no layout copies."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from unidev.adapters.tensorflow import build
from unidev.core import discovery

PLUGINS = {r.spec.tf_type: r.name for r in discovery.discover() if r.usable and r.spec}
# Which plugin's helper makes its kernels run channels-last strides without a copy: the plugin
# side of the zero-copy assertion depends on it (the adapter side never does).
LAYOUT_OWNER = {"x86": "nhwc-x86", "aurora": "nhwc-aurora"}

CHILD = r'''
import json, sys
import numpy as np
import tensorflow as tf
import keras
from tensorflow.python.eager import context
import unidev
from unidev.adapters.tensorflow import counters

tf_type, plugin = sys.argv[1], sys.argv[2]
dev = f"/device:{tf_type}:0"
out = {"ops": {}}


def diff(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.max(np.abs(a - b) / (1 + np.abs(b)))) if a.size else 0.0


def on(device, fn, *args):
    with tf.device(device):
        res = fn(*[tf.identity(a) for a in args])
        return [np.asarray(r) for r in (res if isinstance(res, (list, tuple)) else [res])]


def compare(name, fn, *args):
    want, got = on("/CPU:0", fn, *args), on(dev, fn, *args)
    out["ops"][name] = max(diff(g, w) for g, w in zip(got, want))


rng = np.random.default_rng(0)
x = rng.standard_normal((2, 9, 8, 6)).astype(np.float32)


def depthwise(strides, padding, mult=2):
    f = tf.constant(rng.standard_normal((3, 3, 6, mult)).astype(np.float32))
    def fn(x):
        with tf.GradientTape(persistent=True) as t:
            t.watch([x, f])
            y = tf.nn.depthwise_conv2d(x, f, strides, padding)
            loss = tf.reduce_sum(y * y)
        return [y, *t.gradient(loss, [x, f])]
    return fn


compare("depthwise_same", depthwise([1, 1, 1, 1], "SAME"), x)
compare("depthwise_stride2_same", depthwise([1, 2, 2, 1], "SAME", 1), x)
compare("depthwise_valid", depthwise([1, 2, 2, 1], "VALID", 3), x)
scale, offset = rng.random(6).astype(np.float32) + 0.5, rng.standard_normal(6).astype(np.float32)
mean, var = rng.standard_normal(6).astype(np.float32), rng.random(6).astype(np.float32) + 0.5


def fused_bn(training, factor):
    def fn(x):
        with tf.GradientTape() as t:
            t.watch(x)
            y, m, v = tf.compat.v1.nn.fused_batch_norm(
                x, scale, offset, mean, var, epsilon=1e-3, is_training=training,
                exponential_avg_factor=factor)
            loss = tf.reduce_sum(y * y)
        return [y, m, v, t.gradient(loss, x)]
    return fn


# NCHW on the device against TF CPU's NHWC, transposed (TF CPU has no NCHW depthwise kernel)
f_nchw = rng.standard_normal((3, 3, 6, 2)).astype(np.float32)


def depthwise_nchw(device):
    with tf.device(device):
        f = tf.constant(f_nchw)
        xt = tf.constant(x.transpose(0, 3, 1, 2) if device == dev else x)
        fmt = "NCHW" if device == dev else "NHWC"
        st = [1, 1, 2, 2] if device == dev else [1, 2, 2, 1]
        with tf.GradientTape() as t:
            t.watch([xt, f])
            y = tf.nn.depthwise_conv2d(xt, f, st, "SAME", data_format=fmt)
            loss = tf.reduce_sum(y * y)
        res = [y, *t.gradient(loss, [xt, f])]
        if device == dev:
            res = [tf.transpose(res[0], [0, 2, 3, 1]), tf.transpose(res[1], [0, 2, 3, 1]), res[2]]
        return [np.asarray(r) for r in res]


out["ops"]["depthwise_nchw"] = max(diff(g, w) for g, w in zip(depthwise_nchw(dev),
                                                               depthwise_nchw("/CPU:0")))


def fused_bn_nchw(x):
    with tf.GradientTape() as t:
        t.watch(x)
        y, m, v = tf.compat.v1.nn.fused_batch_norm(
            tf.transpose(x, [0, 3, 1, 2]), scale, offset, mean, var, epsilon=1e-3,
            data_format="NCHW", exponential_avg_factor=0.5)
        loss = tf.reduce_sum(y * y)
    return [y, m, v, t.gradient(loss, x)]


def fused_bn_no_stats(x):  # training with factor 1: the running statistics may be empty
    with tf.GradientTape() as t:
        t.watch(x)
        y, m, v = tf.compat.v1.nn.fused_batch_norm(x, scale, offset, epsilon=1e-3)
        loss = tf.reduce_sum(y * y)
    return [y, m, v, t.gradient(loss, x)]


compare("fused_bn_nchw", fused_bn_nchw, x)
compare("fused_bn_no_stats", fused_bn_no_stats, x)
compare("fused_bn_train", fused_bn(True, 0.3), x)
compare("fused_bn_train_factor1", fused_bn(True, 1.0), x)
compare("fused_bn_inference", fused_bn(False, 1.0), x)


def pad_relu6(x):
    with tf.GradientTape() as t:
        t.watch(x)
        y = tf.nn.relu6(tf.pad(x * 4, [[0, 0], [1, 2], [0, 1], [0, 0]]))
        loss = tf.reduce_sum(y * y)
    return [y, t.gradient(loss, x), tf.slice(x, [0, 1, 2, 0], [1, -1, 3, 6])]


compare("pad_slice_relu6", pad_relu6, x)

# a Keras channels_last CNN: conv + BN + relu + pool + depthwise + dense, SGD momentum
L = keras.layers
def model():
    keras.utils.set_random_seed(1)
    return keras.Sequential([
        keras.Input((16, 16, 3)), L.Conv2D(8, 3, padding="same"), L.BatchNormalization(),
        L.ReLU(), L.MaxPooling2D(), L.DepthwiseConv2D(3, padding="same"), L.ReLU(6.0),
        L.Conv2D(8, 3, padding="valid"), L.AveragePooling2D(2), L.GlobalAveragePooling2D(),
        L.Dense(10)])

xs = rng.random((8, 16, 16, 3)).astype(np.float32)
ys = rng.integers(0, 10, 8)
results = {}
for device in ("/CPU:0", dev):
    with tf.device(device):
        m = model()
        m.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        losses = [float(m.train_on_batch(xs, ys))]
        if device == dev:
            ctx = context.context()
            ctx.enable_run_metadata()
            counters.reset(plugin)
            before = unidev.debug_counters(plugin)
        losses.append(float(m.train_on_batch(xs, ys)))
        if device == dev:
            after = unidev.debug_counters(plugin)
            out["counts"] = counters.op_counts(plugin)
            md = ctx.export_run_metadata()
            ctx.disable_run_metadata()
            out["graph_ops"] = sorted({n.op for g in md.function_graphs
                                      for n in g.post_optimization_graph.node})
            out["placement"] = sorted({(n.op, n.device.split("/")[-1]) for g in md.function_graphs
                                       for n in g.post_optimization_graph.node})
            out["layout_copies"] = {k: after[k] - before.get(k, 0) for k in after
                                    if "layout" in k}
        results[device] = (losses, [w.numpy() for w in m.weights])
(lc, wc), (ld, wd) = results["/CPU:0"], results[dev]
out["losses"] = [lc, ld]
out["weight_diff"] = max(diff(a, b) for a, b in zip(wd, wc))
print("RESULT " + json.dumps(out))
'''

LAYOUT_OPS = {"Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "DepthwiseConv2dNative",
              "DepthwiseConv2dNativeBackpropInput", "DepthwiseConv2dNativeBackpropFilter",
              "MaxPool", "MaxPoolGrad", "AvgPool", "AvgPoolGrad", "FusedBatchNormV3",
              "FusedBatchNormGradV3", "BiasAdd", "BiasAddGrad"}


@pytest.fixture(scope="module")
def installed() -> None:
    if build.tf_install() is None:
        pytest.skip("tensorflow is not installed")
    msgs = build.build()
    assert not [m for m in msgs if "failed" in m or "not built" in m], msgs


@pytest.mark.parametrize("tf_type", sorted(PLUGINS))
def test_keras_channels_last_step_has_no_layout_copies(installed, tf_type):
    plugin = PLUGINS[tf_type]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", VESIM_DEVICES="1")
    res = subprocess.run([sys.executable, "-c", textwrap.dedent(CHILD), tf_type, plugin],
                         env=env, capture_output=True, text=True, timeout=600)
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")]
    assert res.returncode == 0 and lines, res.stderr[-3000:]
    r = json.loads(lines[-1][7:])
    bad = {k: v for k, v in r["ops"].items() if v > 1e-4}
    assert not bad, bad
    (cpu, got) = r["losses"]
    assert got == pytest.approx(cpu, rel=1e-4, abs=1e-5), r["losses"]
    assert r["weight_diff"] < 1e-4
    on_cpu = [op for op, d in r["placement"] if d.startswith("device:CPU") and
              op not in ("_Arg", "_Retval", "Const", "Pack", "NoOp")]
    assert on_cpu == [], r["placement"]
    # Grappler leaves the NHWC graph alone on a PluggableDevice: no Transpose inserted, none run
    assert "Transpose" not in r["graph_ops"]
    counts = r["counts"]
    assert counts.get("Conv2D", {}).get("calls", 0) >= 2, counts
    assert "Transpose" not in counts
    assert not {op: c for op, c in counts.items() if c.get("transposes")}, counts
    # the adapter side: no copy or pad issued for any layout-sensitive op (symmetric padding)
    assert not {op: c for op, c in counts.items()
                if op in LAYOUT_OPS and (c.get("copies") or c.get("pads"))}, counts
    # the plugin side (depends on LAYOUT_OWNER[plugin]'s channels-last kernels)
    assert "layout_copies" in r["layout_copies"], (LAYOUT_OWNER.get(plugin), r["layout_copies"])
    assert all(v == 0 for v in r["layout_copies"].values()), (LAYOUT_OWNER.get(plugin),
                                                              r["layout_copies"])
