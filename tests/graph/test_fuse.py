"""Fusion: batch-norm folding, conv/gemm epilogues, elementwise programs, against the reference."""

from __future__ import annotations

import numpy as np
import pytest
from graphcheck import check_pass, inputs_for, ops, random_graph

from unidev.graph import Graph, evaluate
from unidev.graph.passes import fold, fuse, optimize, unfuse


def _w(g: Graph, *shape: int, seed: int = 0) -> object:
    return g.const((np.random.default_rng(seed).standard_normal(shape) * 0.2).astype("f4"))


@pytest.mark.parametrize("act", ["relu", "gelu", "gelu_tanh", "sigmoid", "tanh", "silu"])
def test_conv_bias_residual_activation(act):
    g = Graph()
    x, r = g.input((2, 3, 8, 8)), g.input((2, 4, 8, 8))
    y = g.call("conv2d", x, _w(g, 4, 3, 3, 3), padding=1)
    y = g.call("add", _w(g, 1, 4, 1, 1, seed=1), y)  # bias as a broadcast add, either side
    y = g.call("add", y, r)  # residual before the activation
    y = unfuse.activation(g, y, act)
    g.output(y)
    assert check_pass(g, fuse.fuse_epilogues) == 1
    assert ops(g) == ["reshape", "conv2d_bias_act"]
    n = g.order()[-1]
    assert n.attrs["activation"] == act and n.inputs[3] is r


def test_gemm_and_matmul_epilogues():
    g = Graph()
    a, res = g.input((5, 6)), g.input((5, 7))
    b = _w(g, 6, 7)
    y1 = g.call("gelu", g.call("gemm", a, b, _w(g, 7, seed=2)), approximate="tanh")
    y2 = g.call("relu", g.call("add", g.call("matmul", a, b), res))
    y3 = g.call("gemm", a, b, _w(g, 7, seed=3), beta=0.5)  # beta != 1: stays
    g.output(y1, y2, y3)
    assert check_pass(g, fuse.fuse_epilogues) == 2
    assert sorted(ops(g)) == ["gemm", "gemm_bias_act", "gemm_bias_act"]


def test_epilogue_stops_at_shared_values():
    g = Graph()
    x = g.input((1, 3, 6, 6))
    y = g.call("conv2d", x, _w(g, 2, 3, 3, 3))
    g.output(g.call("relu", y), y)  # y itself is an output: no fusion
    assert check_pass(g, fuse.fuse_epilogues) == 0


def test_batch_norm_folds_into_conv_for_inference():
    g = Graph()
    x = g.input((2, 3, 8, 8))
    y = g.call("conv2d", x, _w(g, 4, 3, 3, 3), _w(g, 4, seed=4), padding=1)
    stats = [g.const(np.random.default_rng(k).uniform(0.5, 1.5, 4).astype("f4"))
             for k in range(4)]
    y, _, _ = g.call("batch_norm", y, *stats, training=False, eps=1e-3)
    g.output(g.call("relu", y))
    check_pass(g, lambda g: fuse.run(g, training=False), rtol=1e-4, atol=1e-5)
    assert ops(g) == ["conv2d_bias_act"] and len(g.consts) == 2


def test_batch_norm_training_is_not_folded():
    g = Graph()
    x, rm, rv = g.input((2, 3, 8, 8)), g.input((4,)), g.input((4,))
    y = g.call("conv2d", x, _w(g, 4, 3, 3, 3))
    y, _, _ = g.call("batch_norm", y, None, None, rm, rv, training=True)
    g.output(y)
    assert fuse.fold_batch_norm(g) == 0


def test_elementwise_region_multi_output_and_broadcast():
    g = Graph()
    x, s, b = g.input((4, 8, 5)), g.input((8, 1)), g.input((5,))
    t = g.call("mul", x, s)
    u = g.call("add", t, b, alpha=0.5)
    v = g.call("tanh", u)
    w = g.call("sub", g.call("mul", v, v), g.const(np.float32(1)))
    g.output(w, t)  # t escapes too: two outputs
    assert check_pass(g, fuse.fuse_elementwise) == 1
    (n,) = g.nodes
    assert n.op == "elementwise_program" and len(n.outputs) == 2
    assert len(n.inputs) == 3  # the scalar constant is inlined as c1.0
    assert "c1.0" in n.attrs["program"]


def test_trailing_reduction_and_keepdims():
    g = Graph()
    x = g.input((3, 4, 6))
    sq = g.call("square", g.call("sub", x, g.const(np.float32(0.5))))
    g.output(g.call("mean", sq, axes=(1, 2), keepdims=True), g.call("max", g.call("exp", x),
                                                                   axes=(-1,)))
    assert check_pass(g, fuse.fuse_elementwise) == 2
    progs = [n for n in g.nodes if n.op == "elementwise_program"]
    assert sorted(p.attrs["reduce"] for p in progs) == ["max", "mean"]
    h = Graph()
    x = h.input((3, 4))
    h.output(h.call("sum", h.call("exp", x), axes=(0,)))  # a leading axis: not a program's
    assert check_pass(h, fuse.fuse_elementwise) == 0


def test_region_never_makes_a_cycle():
    g = Graph()
    x = g.input((4, 4))
    a = g.call("exp", x)
    m = g.call("matmul", a, a)  # outside any region, depends on a
    g.output(g.call("add", g.call("neg", a), m))  # joining a's region would loop through m
    check_pass(g, fuse.fuse_elementwise)
    g.check()


def test_optimize_resnet_block_and_unfuse_round_trip():
    g = Graph()
    x = g.input((2, 4, 8, 8))
    y = g.call("conv2d", x, _w(g, 4, 4, 3, 3), padding=1)
    stats = [g.const(np.random.default_rng(k).uniform(0.5, 1.5, 4).astype("f4"))
             for k in range(4)]
    y, _, _ = g.call("batch_norm", y, *stats, training=False)
    y = g.call("relu", g.call("add", y, x))
    p, _ = g.call("max_pool2d", g.call("relu", y), kernel_size=2)
    z = g.call("mul", g.call("sigmoid", p), g.const(np.float32(3)))
    g.output(g.call("sum", g.call("add", z, p), axes=(2, 3)))
    xs = inputs_for(g)
    ref = evaluate(g, xs)
    counts = optimize(g)
    assert counts["fuse"] >= 3
    assert ops(g) == ["conv2d_bias_act", "max_pool2d", "elementwise_program"]
    np.testing.assert_allclose(evaluate(g, xs)[0], ref[0], rtol=1e-4, atol=1e-4)
    for n in [n for n in g.nodes if n.schema.tier == 4]:
        unfuse.expand(g, n)
    fold.run(g)
    assert "conv2d_bias_act" not in ops(g) and "elementwise_program" not in ops(g)
    np.testing.assert_allclose(evaluate(g, xs)[0], ref[0], rtol=1e-4, atol=1e-4)


def test_unfuse_program_tokens():
    g = Graph()
    x, y = g.input((3, 5)), g.input((5,))
    prog = "i0 i1 gt i0 i1 where s0 r0 silu o0 r0 c2.0 le o1 i1 gelu_tanh o2"
    g.output(*g.call("elementwise_program", x, y, program=prog))
    xs = inputs_for(g)
    ref = evaluate(g, xs)
    unfuse.expand(g, g.nodes[0])
    assert "elementwise_program" not in ops(g)
    for a, b in zip(evaluate(g, xs), ref, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)



@pytest.mark.parametrize("seed", range(40))
def test_random_elementwise_graphs(seed):
    """optimize() keeps every output of random elementwise DAGs (programs, registers, inlined
    constants, reductions, values read by other ops)."""
    g = random_graph(seed)
    before = sum(n.op != "reshape" for n in g.nodes)
    check_pass(g, optimize, rtol=1e-4, atol=1e-5, seed=seed)
    assert sum(n.op != "reshape" for n in g.nodes) <= before


def test_backward_ops_compares_and_where_fuse():
    g = Graph()
    grad, x, y = g.input((4, 6)), g.input((4, 6)), g.input((6,))
    t = g.call("threshold_backward", grad, x, threshold=0.25)
    s = g.call("sigmoid_backward", t, g.call("sigmoid", x))
    h = g.call("tanh_backward", s, g.call("tanh", y))
    m = g.call("where", h, g.call("lerp", x, h, weight=0.3), g.call("gt", x, y))
    c = g.call("addcdiv", g.call("addcmul", m, x, y, value=0.5), grad, g.call("exp", y),
               value=-2.0)
    g.output(c)
    assert check_pass(g, fuse.fuse_elementwise) >= 1
    # the [6]-shaped tanh(y) and exp(y) are siblings: a second program with two outputs
    assert ops(g) == ["elementwise_program"] * 2
    assert sorted(len(n.outputs) for n in g.nodes) == [1, 2]
    mask = Graph()
    a = mask.input((3,))
    mask.output(mask.call("gt", mask.call("exp", a), mask.call("neg", a)))  # bool escapes
    assert check_pass(mask, fuse.fuse_elementwise) == 0


def test_region_respects_in_place_order():
    """exp(p) must run before p's update and add(., new p) after it: one program cannot hold
    both (it would read p before and after the update)."""
    g = Graph()
    p, grad = g.input((4,)), g.input((4,))
    e = g.call("exp", p)
    g.call("sgd_update", p, grad, lr=0.1)
    g.output(g.call("mul", g.call("add", e, g.version(p)), e))
    check_pass(g, optimize)
    assert ops(g).count("elementwise_program") <= 1


def test_epilogue_respects_in_place_order():
    g = Graph()
    x, grad = g.input((1, 2, 5, 5)), g.input((1, 2, 5, 5))
    y = g.call("conv2d", x, _w(g, 2, 2, 1, 1))  # reads the old x
    g.call("sgd_update", x, grad, lr=0.1)
    g.output(g.call("relu", g.call("add", y, g.version(x))))  # residual: the new x
    check_pass(g, fuse.fuse_epilogues)
    assert "conv2d_bias_act" not in ops(g)


def test_sibling_regions_share_one_program():
    g = Graph()
    x = g.input((6, 32))
    s1 = g.call("sum", g.call("mul", x, g.const(np.float32(0.5))), axes=(1,))
    s2 = g.call("sum", g.call("square", g.call("sub", x, g.const(np.float32(1)))), axes=(1,))
    g.output(s1, g.call("mul", s1, s2))
    assert check_pass(g, fuse.fuse_elementwise) == 1
    (p,) = [n for n in g.nodes if n.op == "elementwise_program"]
    assert len(p.outputs) == 2 and p.attrs["reduce"] == "sum" and p.inputs == [g.inputs[0]]
    h = Graph()  # the second chain depends on the first one's reduction: two programs
    x = h.input((6, 32))
    m = h.call("sum", h.call("exp", x), axes=(1,), keepdims=True)
    h.output(h.call("sum", h.call("mul", h.call("sub", x, m), x), axes=(1,)))
    assert check_pass(h, fuse.fuse_elementwise) == 2


def test_regions_that_would_feed_each_other_stay_apart():
    """Two greedy regions that read each other's values (found by random graphs): fusing both
    would make two programs that feed each other; the second stays unfused."""
    g = Graph()
    x = g.input((5,))
    m = g.call("minimum", x, g.const(np.float32(0.7)))  # region A: minimum, sigmoid, ...
    n = g.call("neg", g.call("mul", x, x))               # region B: mul, neg, ...
    b = g.call("mul", n, m)                              # ... B reads A
    a = g.call("sigmoid_backward", g.call("sigmoid", m), n)  # ... A reads B
    g.output(g.call("sub", b, a), m)
    check_pass(g, fuse.fuse_elementwise)
    assert "elementwise_program" in ops(g)


def test_epilogue_joins_a_program_where_the_device_lacks_the_fused_op():
    g = Graph()
    x = g.input((2, 4, 6, 6))
    y = g.call("conv2d", x, _w(g, 4, 4, 3, 3), _w(g, 4, seed=1), padding=1)
    y = g.call("relu", g.call("add", y, x))
    g.output(y)
    want = evaluate(g, inputs_for(g))
    lacks = {"conv2d_bias_act", "gemm_bias_act"}
    optimize(g, has_kernel=lambda op, dtype: op not in lacks)
    assert ops(g) == ["conv2d", "elementwise_program"]  # residual + relu in one pass
    np.testing.assert_allclose(evaluate(g, inputs_for(g))[0], want[0], rtol=1e-5, atol=1e-6)
    g2 = Graph()
    x2 = g2.input((3, 5))
    g2.output(g2.call("relu", g2.call("exp", x2)))
    optimize(g2, has_kernel=lambda op, dtype: op != "elementwise_program")
    assert ops(g2) == ["exp", "relu"]  # nothing to run a program: left as it is
