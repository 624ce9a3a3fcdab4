"""Dead-code elimination against the reference."""

from __future__ import annotations

import numpy as np
from graphcheck import check_pass, ops

from unidev.graph import Graph
from unidev.graph.passes import dce


def test_removes_unused_nodes_and_constants_keeps_updates():
    g = Graph()
    x, p, grad = g.input((3, 4)), g.input((4,)), g.input((4,))
    dead = g.call("exp", g.call("mul", x, g.const(np.full((3, 4), 2, "f4"))))
    g.call("neg", dead)
    g.call("sgd_update", p, grad, lr=0.1)  # no outputs, but it updates graph inputs: live
    g.output(g.call("relu", x))
    assert check_pass(g, dce.run) == 3
    assert ops(g) == ["sgd_update", "relu"] or ops(g) == ["relu", "sgd_update"]
    assert not g.consts


def test_dead_update_of_a_temporary_goes():
    g = Graph()
    x = g.input((4,))
    t, gr = g.call("exp", x), g.call("neg", x)
    g.call("sgd_update", t, gr)  # updates a temp nothing reads afterwards
    g.output(g.call("abs", x))
    assert check_pass(g, dce.run) == 3
    assert ops(g) == ["abs"]
