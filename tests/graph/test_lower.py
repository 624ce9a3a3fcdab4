"""Lowering to a Plan: steps, views as strides, unfusing, memory plan; run by a numpy stepper."""

from __future__ import annotations

import numpy as np
import pytest
from graphcheck import inputs_for, random_graph

import unidev
from unidev.contract import opset
from unidev.core import reference
from unidev.graph import Graph, evaluate, lower, optimize
from unidev.graph.plan import Plan


def _run(plan: Plan, xs: list[np.ndarray]) -> list[np.ndarray]:
    """Execute a plan over flat numpy buffers, as the native runtime does with device memory."""
    mem = []
    for b in plan.buffers:
        if b.kind == "input":
            mem.append(xs[b.slot].reshape(-1).view(np.uint8))
        elif b.kind == "const":
            mem.append(np.ascontiguousarray(plan.consts[b.slot]).reshape(-1).view(np.uint8))
        elif b.kind == "output":
            mem.append(np.zeros(b.nbytes, np.uint8))
        else:
            mem.append(None)
    arena = np.full(plan.arena_bytes + 64, 0xFF, np.uint8)  # garbage: nothing may read it
    for b in plan.buffers:
        if b.kind == "temp":
            mem[b.index] = arena[b.offset:b.offset + b.nbytes]

    def view(r):
        if r is None:
            return None
        dt = np.dtype(r.dtype)
        base = mem[r.buffer].view(dt)
        return np.lib.stride_tricks.as_strided(
            base[r.offset:], r.shape, tuple(s * dt.itemsize for s in r.strides))
    for s in plan.steps:
        ins = [view(r) for r in s.inputs]
        outs = [view(r) for r in s.outputs]
        attrs = {n: v for n, _, v in s.attrs}
        if s.op == "copy":
            outs[0][...] = ins[0]
            continue
        ins = [np.array(a) if a is not None and a.strides.count(0) else a for a in ins]
        if any(i.mutated for i in opset.get(s.op).inputs):
            reference.run(s.op, ins, attrs)
            continue
        for o, r in zip(outs, reference.run(s.op, ins, attrs), strict=True):
            o[...] = r
    return [view(r).copy() for r in plan.outputs]

def _mlp() -> Graph:
    g = Graph()
    x = g.input(("N", 6))
    w1 = g.const(np.random.default_rng(1).standard_normal((8, 6)).astype("f4"))
    h = g.call("relu", g.call("gemm", x, w1.T, g.const(np.ones(8, "f4"))))
    h = g.call("mul", g.call("tanh", h), g.call("sigmoid", h))
    g.output(g.call("sum", g.call("square", h), axes=(1,)), h.reshape("N", 2, 4))
    return g

@pytest.mark.parametrize("fused", [True, False])
def test_plan_matches_reference(fused):
    g = _mlp()
    optimize(g)
    xs = inputs_for(g.specialize(N=3))
    ref = evaluate(g, xs)
    plan = lower(g, (lambda op, dt: True) if fused else (lambda op, dt: opset.get(op).tier < 4),
                 bind={"N": 3})
    ops = [s.op for s in plan.steps]
    if fused:
        assert "gemm_bias_act" in ops and "elementwise_program" in ops
    else:
        assert not {"gemm_bias_act", "elementwise_program"} & set(ops)
        assert plan.meta["unfused"]
    for a, b in zip(_run(plan, xs), ref, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    assert plan.key == g.key()
    for k, r in enumerate(plan.inputs):
        assert plan.buffers[r.buffer].slot == k
    for r in plan.inputs + plan.outputs:
        b = plan.buffers[r.buffer]
        assert b.kind in ("input", "output") and r.offset == 0

def test_views_in_place_and_arena():
    g = Graph()
    x, p, grad = g.input((4, 6)), g.input((6,)), g.input((6,))
    t = x.T  # a view: a transposed TensorRef, no step
    a = g.call("exp", g.call("neg", t))  # neg's temp dies at exp: exp writes over it
    b = g.call("matmul", a, x)
    c = a.reshape(24)  # reshape of a contiguous temp: a view
    d = b.reshape(36)
    g.call("sgd_update", p, grad, lr=0.5)
    g.output(d, c, g.version(p))
    xs = inputs_for(g)
    ref = evaluate(g, [v.copy() for v in xs])
    plan = lower(g, lambda op, dt: True)
    assert [s.op for s in plan.steps].count("copy") == 3  # outputs that are views / state
    assert plan.meta["inplace"] == 1
    neg = next(s for s in plan.steps if s.op == "neg")
    assert neg.inputs[0].strides == (1, 6)
    for got, want in zip(_run(plan, xs), ref, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(xs[1], ref[2])  # the state input was updated in place
    assert plan.arena_bytes >= plan.meta["peak_bytes"] > 0

def test_chain_arena_reuses_memory():
    g = Graph()
    x = g.input((256,))
    v = x
    for k in range(6):  # alternate ops that cannot run in place (matmul-free: use sum/expand)
        v = g.call("expand", g.call("sum", g.call("exp", v), axes=(0,), keepdims=True),
                   shape=(256,)) if k % 2 else g.call("sin", g.call("cos", v))
    g.output(v)
    plan = lower(g, lambda op, dt: True)
    assert plan.arena_bytes < plan.meta["unplanned_bytes"]
    np.testing.assert_allclose(_run(plan, inputs_for(g))[0], evaluate(g, inputs_for(g))[0],
                               rtol=1e-5)

def test_errors():
    g = _mlp()
    with pytest.raises(unidev.InvalidArgumentError, match="symbolic dimensions"):
        lower(g, lambda op, dt: True)
    with pytest.raises(unidev.UnsupportedError, match=r"node '.*' \(gemm\): the device has no"):
        lower(g, lambda op, dt: op != "gemm", bind={"N": 2})
    optimize(g)
    with pytest.raises(unidev.UnsupportedError, match=r"\(gemm\) \(unfused from node '.*' "
                                                      r"\(gemm_bias_act\)\): the device"):
        lower(g, lambda op, dt: op not in ("gemm", "gemm_bias_act"), bind={"N": 2})


@pytest.mark.parametrize("seed", range(20))
def test_random_graphs_fused_and_unfused(seed):
    """Plans of random graphs (arena reuse, in-place steps, views, unfused programs) give the
    reference's results; temps start as garbage."""
    g = random_graph(seed)
    xs = inputs_for(g, seed)
    ref = evaluate(g, xs)
    optimize(g)
    for has in (lambda op, dt: True, lambda op, dt: opset.get(op).tier < 4):
        plan = lower(g, has)
        for a, b in zip(_run(plan, xs), ref, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("seed", range(6))
def test_plans_run_natively(dev, seed):
    """The same plans on the native runtime of each device (fused where the plugin has the
    tier-4 kernels, unfused where it lacks them) give the reference's results."""
    from unidev.core.ops import kernel_for
    from unidev.graph.executor import CompiledPlan

    device = unidev.device(dev)
    g = random_graph(seed)
    xs = inputs_for(g, seed)
    ref = evaluate(g, xs)
    optimize(g)
    try:
        plan = lower(g, lambda op, dt: kernel_for(device, op, dt) is not None)
    except unidev.UnsupportedError as e:  # the test plugin has a few ops only
        op = str(e).split("(")[1].split(")")[0]
        assert kernel_for(device, op, "float32") is None and opset.get(op).tier < 4, e
        return
    outs = CompiledPlan(plan, device).run([unidev.DeviceArray.from_numpy(x, device) for x in xs])
    for a, b in zip(outs, ref, strict=True):
        np.testing.assert_allclose(a.numpy(), b, rtol=1e-4, atol=1e-5)


def _block() -> Graph:
    """conv + batch norm (inference) + residual + relu, pool, linear + gelu, an SGD step."""
    rng = np.random.default_rng(7)
    g = Graph("block")
    x, p, grad = g.input((2, 4, 8, 8)), g.input((5,)), g.input((5,))
    w = g.const((rng.standard_normal((4, 4, 3, 3)) * 0.2).astype("f4"))
    y = g.call("conv2d", x, w, padding=1)
    stats = [g.const(rng.uniform(0.5, 1.5, 4).astype("f4")) for _ in range(4)]
    y, _, _ = g.call("batch_norm", y, *stats, training=False)
    y = g.call("relu", g.call("add", y, x))
    pooled, _ = g.call("max_pool2d", y, kernel_size=2)
    z = g.call("mul", g.call("sigmoid", pooled), g.const(np.float32(3)))
    lin = g.call("gemm", z.reshape(2, -1), g.const(rng.standard_normal((5, 64)).astype("f4")).T,
                 g.const(rng.standard_normal(5).astype("f4")))
    g.call("sgd_update", p, grad, lr=0.1)
    g.output(g.call("sum", g.call("add", z, pooled), axes=(2, 3)), g.call("gelu", lin),
             g.version(p))
    return g


def test_block_runs_natively(dev):
    from unidev.core.ops import kernel_for
    from unidev.graph.executor import CompiledPlan

    device = unidev.device(dev)
    g = _block()
    xs = inputs_for(g)
    ref = evaluate(g, [x.copy() for x in xs])
    optimize(g)
    assert [n.op for n in g.order()].count("elementwise_program") == 1
    has = lambda op, dt: kernel_for(device, op, dt) is not None  # noqa: E731
    if not all(has(op, "float32") for op in ("conv2d", "gemm", "max_pool2d", "sgd_update")):
        pytest.skip(f"{dev} lacks the block's base ops")
    plan = lower(g, has)
    fused = {s.op for s in plan.steps} & {"conv2d_bias_act", "gemm_bias_act",
                                         "elementwise_program"}
    assert fused == {op for op in ("conv2d_bias_act", "gemm_bias_act", "elementwise_program")
                     if has(op, "float32")}
    arrays = [unidev.DeviceArray.from_numpy(x, device) for x in xs]
    outs = CompiledPlan(plan, device).run(arrays)
    for a, b in zip(outs, ref, strict=True):
        np.testing.assert_allclose(a.numpy(), b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(arrays[1].numpy(), ref[2], rtol=1e-6)  # updated in place


def test_outputs_and_views_of_updated_state_keep_the_old_contents():
    g = Graph()
    p, grad = g.input((2, 3)), g.input((2, 3))
    flat = p.reshape(6)  # a view of the old p
    g.call("sgd_update", p, grad, lr=1.0)
    late = g.call("exp", flat)  # reads the old p through the view: must run before the update
    g.output(p, late, g.version(p))
    assert [n.op for n in g.order()].index("exp") < [n.op for n in g.order()].index("sgd_update")
    xs = inputs_for(g)
    p0 = xs[0].copy()
    old, e, new = evaluate(g, [x.copy() for x in xs])
    np.testing.assert_array_equal(old, p0)
    np.testing.assert_allclose(e, np.exp(p0).reshape(6), rtol=1e-6)
    np.testing.assert_allclose(new, p0 - xs[1], rtol=1e-6)
    plan = lower(g, lambda op, dt: True)
    for a, b in zip(_run(plan, [x.copy() for x in xs]), (old, e, new), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    h = Graph()
    p, grad = h.input((3,)), h.input((3,))
    h.call("sgd_update", p, grad, lr=1.0)
    h.output(h.call("add", h.version(p), p.reshape(3)))
    with pytest.raises(unidev.InvalidArgumentError, match="cycle"):
        h.check()  # the old p read after its own update through a view: no order exists
