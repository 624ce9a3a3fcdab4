"""Common-subexpression elimination against the reference."""

from __future__ import annotations

import numpy as np
from graphcheck import check_pass, ops

from unidev.graph import Graph
from unidev.graph.passes import cse


def test_merges_duplicates_not_different_attributes():
    g = Graph()
    x = g.input((2, 5))
    c1, c2 = g.const(np.ones(5, "f4")), g.const(np.ones(5, "f4"))
    a, b = g.call("add", x, c1), g.call("add", x, c2)  # equal after constants merge
    d = g.call("add", x, c1, alpha=2.0)  # different attribute: kept
    s1, s2 = g.call("sum", a, axes=(1,)), g.call("sum", b, axes=1)  # normalized alike
    g.output(g.call("mul", s1, s2), d)
    assert check_pass(g, cse.run) == 3
    assert ops(g).count("add") == 2 and ops(g).count("sum") == 1 and len(g.consts) == 1


def test_never_merges_in_place_updates():
    g = Graph()
    p, q, grad = g.input((3,)), g.input((3,)), g.input((3,))
    g.call("sgd_update", p, grad, lr=0.1)
    g.call("sgd_update", q, g.version(grad), lr=0.1)
    g.output(g.version(p), g.version(q))
    assert check_pass(g, cse.run) == 0
    assert ops(g).count("sgd_update") == 2
