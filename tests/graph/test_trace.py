"""Tracing unidev.ops calls into a graph (no framework, nothing run on the device)."""

from __future__ import annotations

import numpy as np
import pytest

import unidev
from unidev import ops
from unidev.graph import evaluate, optimize, trace


def _step(g, x, w):
    y = ops.conv2d(x, w, padding=1)
    y = ops.add(y, np.zeros((4, 1, 1), np.float32))  # numpy arrays become constants
    return ops.relu(ops.mul(y, ops.sigmoid(y)))


def test_placeholders_record_and_key_is_stable():
    keys = []
    for _ in range(2):
        with trace() as g:
            x = g.input(("N", 3, 8, 8))
            w = g.input((4, 3, 3, 3))
            g.output(_step(g, x, w))
        keys.append(g.key())
    assert keys[0] == keys[1]
    assert [n.op for n in g.order()] == ["conv2d", "add", "sigmoid", "mul", "relu"]
    assert ops._trace_hook is None  # the block restores eager mode
    s = g.specialize(N=2)
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(v.shape).astype("f4") for v in s.inputs]
    ref = evaluate(s, xs)
    optimize(s)
    # the zero bias goes (x + 0), x * sigmoid(x) is the conv's silu epilogue
    assert [n.op for n in s.order()] == ["conv2d_bias_act", "relu"]
    assert s.order()[0].attrs["activation"] == "silu"
    np.testing.assert_allclose(evaluate(s, xs)[0], ref[0], rtol=1e-5, atol=1e-6)


def test_device_arrays_become_inputs_or_constants(testdev):
    a = unidev.DeviceArray.from_numpy(np.arange(6, dtype="f4").reshape(2, 3), testdev)
    with trace() as g:
        y = ops.add(a, a, alpha=2.0)
        z = ops.sum(ops.exp(y), axes=(1,))
        ops.sgd_update(a, ops.neg(a), lr=0.1)
        g.output(z, y.T)
    assert len(g.inputs) == 1 and g.meta["bindings"][g.inputs[0].name] is a
    assert g.effects()  # a is updated in place
    np.testing.assert_array_equal(a.numpy(), np.arange(6).reshape(2, 3))  # nothing ran
    with trace(constants=True) as h:
        h.output(ops.mul(a, a))
    assert not h.inputs and len(h.consts) == 1
    np.testing.assert_array_equal(evaluate(h, [])[0], np.arange(6).reshape(2, 3) ** 2)


def test_trace_errors():
    with trace() as g:
        x = g.input((3,))
        with pytest.raises(unidev.InvalidArgumentError, match="out= is not recorded"):
            ops.relu(x, out=x)
        with pytest.raises(unidev.InvalidArgumentError, match="input 'x' is a list"):
            ops.relu([1.0, 2.0])
        with pytest.raises(unidev.InvalidArgumentError, match="nested"):
            with trace():
                pass
    assert ops._trace_hook is None


def test_other_threads_run_eagerly(testdev):
    import threading

    a = unidev.DeviceArray.from_numpy(np.arange(4, dtype="f4"), testdev)
    got = []
    with trace() as g:
        x = g.input((4,))
        t = threading.Thread(target=lambda: got.append(ops.add(a, a)))
        t.start()
        t.join()
        g.output(ops.add(x, x))
    assert isinstance(got[0], unidev.DeviceArray)  # ran on the device, not recorded
    np.testing.assert_array_equal(got[0].numpy(), 2 * np.arange(4))
    assert [n.op for n in g.nodes] == ["add"] and not g.meta
