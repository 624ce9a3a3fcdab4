"""Constant folding through the reference."""

from __future__ import annotations

import numpy as np
from graphcheck import check_pass, ops

from unidev.graph import Graph
from unidev.graph.passes import fold


def test_folds_constant_subgraphs_and_views():
    g = Graph()
    x = g.input((4, 3))
    w = g.const(np.arange(12, dtype="f4").reshape(3, 4))
    wt = g.call("exp", g.call("mul", w, g.const(np.float32(0.1)))).T  # constant: folds
    z = g.call("fill", shape=(4, 3), value=2.0)  # no inputs: folds
    g.output(g.call("add", g.call("mul", x, wt), z))
    assert check_pass(g, fold.run) == 4
    assert ops(g) == ["mul", "add"]


def test_keeps_big_results_and_updates():
    g = Graph()
    x = g.input((2,))
    big = g.call("expand", g.const(np.ones(1, "f4")), shape=(fold.MAX_ELEMENTS + 1,))
    g.output(g.call("sum", big), x)
    assert check_pass(g, fold.run) == 0
