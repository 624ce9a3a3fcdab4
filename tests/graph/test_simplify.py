"""Algebraic simplification against the reference."""

from __future__ import annotations

import numpy as np
from graphcheck import check_pass, ops

from unidev.graph import Graph
from unidev.graph.passes import simplify


def test_identities():
    g = Graph()
    x, y = g.input((2, 3)), g.input((3,))
    one, zero = g.const(np.ones(3, "f4")), g.const(np.zeros((), "f4"))
    v = g.call("add", g.call("mul", x, one), zero)       # x*1 + 0 -> x
    v = g.call("neg", g.call("neg", g.call("sub", v, zero)))  # --(v - 0) -> v
    v = g.call("cast", g.call("copy", v), dtype="float32")
    keep = g.call("mul", y, one)  # y * 1 with y [3] broadcast? no: same shape, goes too
    bcast = g.call("add", g.call("expand", y, shape=(2, 3)), zero)  # -> expand(y)
    widen = g.call("mul", g.const(np.ones((2, 3), "f4")), y)  # broadcasts y: kept
    g.output(v, keep, bcast, widen)
    assert check_pass(g, simplify.run) >= 7
    assert ops(g) == ["expand", "mul"]
    assert g.outputs[0] is g.inputs[0] and g.outputs[1] is g.inputs[1]


def test_view_chains():
    g = Graph()
    x = g.input((2, 3, 4))
    t = x.transpose(1, 2, 0).transpose(2, 0, 1)  # identity permutation in total
    r = x.reshape(6, 4).reshape(4, 6).reshape(24)
    p = x.transpose(2, 0, 1).transpose(0, 2, 1)  # one transpose (2, 1, 0)
    g.output(g.call("exp", t), r, p)
    assert check_pass(g, simplify.run) >= 3
    assert ops(g) == ["exp", "reshape", "transpose"] or sorted(ops(g)) == \
        ["exp", "reshape", "transpose"]
    assert [n.attrs for n in g.nodes if n.op == "transpose"] == [{"perm": (2, 1, 0)}]


def test_relu_moves_after_max_pool():
    g = Graph()
    x = g.input((2, 3, 8, 8))
    y, _ = g.call("max_pool2d", g.call("relu", x), kernel_size=2)
    g.output(y)
    assert check_pass(g, simplify.run) == 1
    assert ops(g) == ["max_pool2d", "relu"]
    h = Graph()
    x = h.input((2, 3, 8, 8))
    r = h.call("relu", x)
    y, idx = h.call("max_pool2d", r, kernel_size=2)
    h.output(y, idx, r)  # relu used elsewhere: kept in place
    assert check_pass(h, simplify.run) == 0


def test_copy_of_updated_storage_stays():
    g = Graph()
    p, grad = g.input((3,)), g.input((3,))
    snap = g.call("copy", p)
    g.call("sgd_update", p, grad, lr=1.0)
    g.output(snap, g.version(p))
    assert check_pass(g, simplify.run) == 0


def test_identity_kept_when_its_readers_follow_an_update():
    g = Graph()
    p, grad = g.input((3,)), g.input((3,))
    same = g.call("mul", p, g.const(np.ones(3, "f4")))  # p * 1, computed before the update
    g.call("sgd_update", p, grad, lr=1.0)
    g.output(g.call("add", same, g.version(p)))  # read after it: same cannot become p
    check_pass(g, simplify.run)
    assert "mul" in ops(g)
