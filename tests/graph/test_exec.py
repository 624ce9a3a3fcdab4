"""The native plan executor on hand-built plans (chain, MLP, conv2d) against the numpy reference."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest

from unidev import _C
from unidev.core import discovery, reference
from unidev.core.array import DeviceArray
from unidev.core.errors import InvalidArgumentError, OutOfBoundsError, UnidevError, UnsupportedError
from unidev.graph import plan as planfile
from unidev.graph.executor import CompiledPlan, load

sys.path.insert(0, str(Path(__file__).parent))
from plan_helpers import Builder, broadcast, chain_plan, mlp_plan, mlp_reference  # noqa: E402

DEVICES = [d for d in ("x86", "aurora") if discovery.get(d).status == discovery.OK]
rng = np.random.default_rng(1)


def arr(a, dev):
    return DeviceArray.from_numpy(np.asarray(a, np.float32), dev)


@pytest.fixture(params=DEVICES)
def dev(request):
    return request.param


def test_chain_matches_reference(dev):
    plan, ref = chain_plan((6, 7))
    cp = CompiledPlan(dataclasses.replace(plan, plugin=dev), dev)
    x, y = rng.standard_normal((2, 6, 7)).astype(np.float32)
    (out,) = cp.run([arr(x, dev), arr(y, dev)])
    np.testing.assert_allclose(out.numpy(), ref(x, y), rtol=1e-6, atol=1e-6)
    # the same plan again, into given outputs: nothing is looked up or uploaded again
    given = cp.new_outputs()
    assert cp.run([arr(y, dev), arr(x, dev)], given)[0] is given[0]
    np.testing.assert_allclose(given[0].numpy(), ref(y, x), rtol=1e-6, atol=1e-6)
    assert cp.steps == [("sum", "add"), ("scale", "mul"), ("act", "relu"), ("res", "sub")]


def test_mlp_and_user_stream(dev):
    plan, weights = mlp_plan(batch=5, sizes=(12, 20, 7))
    cp = CompiledPlan(plan, dev)
    x = rng.standard_normal((5, 12)).astype(np.float32)
    lib = cp.device.library
    s = lib.stream_create(0)
    try:
        (out,) = cp.run([arr(x, dev)], stream=s)
        lib.stream_synchronize(s)
        np.testing.assert_allclose(out.numpy(), mlp_reference(x, weights), rtol=1e-4, atol=1e-5)
    finally:
        lib.stream_destroy(s)


def test_conv2d_bias_relu(dev):
    x = rng.standard_normal((2, 3, 7, 6)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(4).astype(np.float32)
    b = Builder("conv")
    xi = b.input(x.shape)
    wc, bc = b.const(w), b.const(bias)
    t = b.temp((2, 4, 4, 6))
    y = b.output((2, 4, 4, 6))
    b.step("conv2d", [xi, wc, bc], [t], "conv3", stride=(2, 1), padding=(1, 1))
    b.step("relu", [t], [y], "relu3")
    (out,) = CompiledPlan(b.plan(), dev).run([arr(x, dev)])
    want = reference.run("conv2d", [x, w, bias], {"stride": (2, 1), "padding": (1, 1)})[0]
    np.testing.assert_allclose(out.numpy(), np.maximum(want, 0), rtol=1e-4, atol=1e-4)


def test_save_load_roundtrip(tmp_path, dev):
    plan, weights = mlp_plan()
    back = planfile.from_bytes(planfile.to_bytes(plan))
    for a, b in zip(back.consts, plan.consts, strict=True):
        np.testing.assert_array_equal(a, b)
    assert dataclasses.replace(back, consts=[]) == dataclasses.replace(plan, consts=[])
    plan = dataclasses.replace(plan, plugin=dev)
    CompiledPlan(plan, dev).save(tmp_path / "mlp.udplan")
    cp = load(tmp_path / "mlp.udplan", dev)
    x = rng.standard_normal((3, 8)).astype(np.float32)
    np.testing.assert_allclose(cp.run([arr(x, dev)])[0].numpy(), mlp_reference(x, weights),
                               rtol=1e-4, atol=1e-5)
    other = "aurora" if dev == "x86" else "x86"
    if other in DEVICES:
        with pytest.raises(InvalidArgumentError, match=f"compiled for plugin '{dev}'"):
            load(tmp_path / "mlp.udplan", other)


def _raw(dev, data):
    return _C.Plan(discovery.load(dev), 0, data)


def test_foreign_and_corrupt_files_refused(tmp_path):
    data = planfile.to_bytes(chain_plan()[0])
    bad = bytearray(data)
    bad[len(bad) // 2] ^= 0x40
    newer = bytearray(data)
    newer[8] = 2
    cases = [(b"\x7fELF" + bytes(60), "not a unidev plan"), (data[:-3], "truncated"),
             (bytes(bad), "corrupt: CRC-32"), (bytes(newer), "version 2")]
    for blob, msg in cases:
        with pytest.raises(planfile.PlanFileError, match=msg):
            planfile.from_bytes(blob)
        with pytest.raises(InvalidArgumentError, match=msg):  # the C runtime on its own
            _raw("x86", blob)
        (tmp_path / "p").write_bytes(blob)
        with pytest.raises(InvalidArgumentError, match=msg):
            load(tmp_path / "p", "x86")


def test_mutated_metadata_never_crashes():
    """Flip metadata bytes (CRC fixed up): the runtime refuses or runs, it never crashes."""
    import zlib
    data = planfile.to_bytes(chain_plan()[0])
    meta_n = planfile.HEADER.unpack_from(data)[3]
    r = np.random.default_rng(7)
    refused = 0
    for _ in range(300):
        blob = bytearray(data)
        for pos in r.integers(planfile.HEADER.size, planfile.HEADER.size + meta_n, 2):
            blob[pos] = int(r.integers(0, 256))
        body = bytes(blob[planfile.HEADER.size:])
        blob[32:36] = zlib.crc32(body).to_bytes(4, "little")
        try:
            _raw("x86", bytes(blob))
        except UnidevError:
            refused += 1
        try:  # the Python reader refuses it too, or reads it
            planfile.from_bytes(bytes(blob))
        except planfile.PlanFileError:
            pass
    assert refused > 100


def test_bad_plans_refused_at_create():
    b = Builder("bad")
    x = b.input((4,))
    y = b.output((4,))
    b.step("relu", [x], [y], "r0")
    plan = b.plan()
    too_far = dataclasses.replace(plan.steps[0].outputs[0], offset=1)
    with pytest.raises(OutOfBoundsError, match=r"node 'r0' \(relu\): output 0.*reaches byte 20"):
        CompiledPlan(dataclasses.replace(plan, steps=[dataclasses.replace(
            plan.steps[0], outputs=[too_far])]), "x86")
    with pytest.raises(UnsupportedError, match=r"node 'r0' \(no_such_op\): plugin 'x86' has no"):
        CompiledPlan(dataclasses.replace(plan, steps=[dataclasses.replace(
            plan.steps[0], op="no_such_op")]), "x86")
    c = Builder("c")
    cr, yo = c.const(np.ones(4, np.float32)), c.output((4,))
    c.step("relu", [yo], [cr], "r1")
    with pytest.raises(InvalidArgumentError, match=r"node 'r1' \(relu\): output 0 writes constant"):
        CompiledPlan(c.plan(), "x86")
    c = Builder("sgd")  # a kernel updating its input in place: that input is no constant
    pc, gi = c.const(np.ones(4, np.float32)), c.input((4,))
    c.step("sgd_update", [pc, gi, None], [], "opt", lr=0.1)
    with pytest.raises(InvalidArgumentError, match=r"node 'opt' \(sgd_update\): input 0 writes"):
        CompiledPlan(c.plan(), "x86")
    state = Builder("inplace")  # an input updated in place: relu(x) written back into x
    xs, ys = state.input((4,)), state.output((4,))
    state.step("relu", [xs], [xs], "relu_")
    state.step("copy", [xs], [ys], "out")
    xv = DeviceArray.from_numpy(np.array([-1, 2, -3, 4], np.float32), "x86")
    (y,) = CompiledPlan(state.plan(), "x86").run([xv])
    np.testing.assert_array_equal(xv.numpy(), [0, 2, 0, 4])
    np.testing.assert_array_equal(y.numpy(), [0, 2, 0, 4])


def test_bad_bindings_refused():
    plan, _ = chain_plan((4, 5))
    cp = CompiledPlan(plan, "x86")
    x = arr(np.ones((4, 5)), "x86")
    with pytest.raises(InvalidArgumentError, match="takes 2 inputs, got 1"):
        cp.run([x])
    with pytest.raises(InvalidArgumentError, match=r"input 1 has shape \(5, 4\), expected \(4,"):
        cp.run([x, arr(np.ones((5, 4)), "x86")])
    with pytest.raises(InvalidArgumentError, match="input 1 has dtype float64, expected float32"):
        cp.run([x, DeviceArray.from_numpy(np.ones((4, 5)), "x86")])
    with pytest.raises(InvalidArgumentError, match=r"input 0 has strides \(1, 4\), expected"):
        xt, out = arr(np.ones((5, 4)), "x86").T, cp.new_outputs()[0]
        cp.run_descriptors([xt.descriptor(), x.descriptor()], [out.descriptor()])
    t = rng.standard_normal((5, 4)).astype(np.float32)  # run() copies a view to the plan's layout
    want = chain_plan((4, 5))[1](t.T, np.ones((4, 5), np.float32))
    np.testing.assert_allclose(cp.run([arr(t, "x86").T, x])[0].numpy(), want, rtol=1e-6)
    with pytest.raises(InvalidArgumentError, match=r"output 0 has strides \(1, 4\), expected"):
        cp.run([x, x], [arr(np.ones((5, 4)), "x86").T])
    with pytest.raises(InvalidArgumentError, match="inputs\\[1\\] is a ndarray"):
        cp.run([x, np.ones((4, 5), np.float32)])
    with pytest.raises(InvalidArgumentError, match="takes 2 inputs and 1 outputs, got 2 and 0"):
        cp.run_descriptors([x.descriptor(), x.descriptor()], [])
    if "aurora" in DEVICES:
        with pytest.raises(InvalidArgumentError, match="is on aurora:0, the plan on x86:0"):
            cp.run([x, arr(np.ones((4, 5)), "aurora")])


def test_plugin_error_names_node_and_op():
    b = Builder("mm")
    a = b.input((3, 4))
    w = b.const(np.ones((5, 2), np.float32))  # 4 != 5: the kernel refuses it when it runs
    y = b.output((3, 2))
    b.step("matmul", [a, w], [y], "conv3.proj")
    cp = CompiledPlan(b.plan(), "x86")
    with pytest.raises(InvalidArgumentError, match=r"^node 'conv3.proj' \(matmul\): "):
        cp.run([arr(np.ones((3, 4)), "x86")])


def test_broadcast_views_and_profile(dev):
    b = Builder("bias")
    x = b.input((3, 4))
    c = b.const(np.arange(4, dtype=np.float32))
    y = b.output((3, 4))
    b.step("add", [x, broadcast(c, (3, 4))], [y], "bias")
    cp = CompiledPlan(b.plan(), dev)
    xv = rng.standard_normal((3, 4)).astype(np.float32)
    timing = cp.profile([arr(xv, dev)])
    assert [(n, o) for n, o, _ in timing] == [("bias", "add")] and timing[0][2] >= 0
    np.testing.assert_allclose(cp.run([arr(xv, dev)])[0].numpy(), xv + np.arange(4))
    with pytest.raises(InvalidArgumentError, match="no profiled run"):
        cp.native.step_times()


def test_runs_on_two_streams_share_the_arena_in_order(dev):
    """Runs alternating between user streams give each run's own result. (The ordering of a
    run after the previous one on another stream, through the plan's done event, cannot be
    observed here: x86 runs kernels at enqueue, vesim one stream at a time.)"""
    plan, ref = chain_plan((64, 33))
    cp = CompiledPlan(plan, dev)
    lib = cp.device.library
    s1, s2 = lib.stream_create(0), lib.stream_create(0)
    try:
        data = [rng.standard_normal((2, 64, 33)).astype(np.float32) for _ in range(4)]
        outs = []
        for k, (xv, yv) in enumerate(data):
            ins = [arr(xv, dev), arr(yv, dev)]
            outs.append(cp.run(ins, stream=(s1, s2)[k % 2]))
        lib.stream_synchronize(s1)
        lib.stream_synchronize(s2)
        for (xv, yv), (out,) in zip(data, outs, strict=True):
            np.testing.assert_allclose(out.numpy(), ref(xv, yv), rtol=1e-6, atol=1e-6)
    finally:
        lib.stream_destroy(s1)
        lib.stream_destroy(s2)
