"""Graph files: save/load round trip through every check, and `unidev graph show`."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest
from graphcheck import inputs_for

import unidev
from unidev.cli import main
from unidev.graph import Graph, evaluate
from unidev.graph.cli import cmd_graph


def _graph() -> Graph:
    g = Graph("blk")
    x, p, grad = g.input(("N", 3, 6, 6), name="x"), g.input((2,)), g.input((2,))
    w = g.const(np.random.default_rng(0).standard_normal((2, 3, 3, 3)).astype("f4"))
    y = g.call("relu", g.call("conv2d", x, w, g.const(np.ones(2, "f4")), padding=1))
    g.call("sgd_update", p, grad, lr=0.25)
    a, b = g.call("elementwise_program", y, program="i0 c-inf maximum o0 i0 exp o1")
    g.output(g.call("sum", a, axes=(1, 2, 3)), b.reshape("N", -1), g.version(p))
    return g


def test_round_trip(tmp_path):
    g = _graph()
    g.save(str(tmp_path / "g.json"))
    h = Graph.load(str(tmp_path / "g.json"))
    assert h.key() == g.key() and str(h) == str(g)
    s, t = g.specialize(N=2), h.specialize(N=2)
    xs = inputs_for(s)
    for a, b in zip(evaluate(s, [x.copy() for x in xs]), evaluate(t, xs), strict=True):
        np.testing.assert_array_equal(a, b)


def test_bad_files(tmp_path):
    d = json.loads(json.dumps(__import__("unidev.graph.serialize").graph.serialize.to_dict(
        _graph())))
    d["nodes"][0]["inputs"][0] = "nowhere"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(d))
    with pytest.raises(unidev.InvalidArgumentError, match="is not defined before it"):
        Graph.load(str(path))
    d["nodes"] = d["nodes"][::-1]  # out of order: an input defined later
    path.write_text(json.dumps(d))
    with pytest.raises(unidev.InvalidArgumentError, match="dangling value or a cycle"):
        Graph.load(str(path))
    path.write_text("{}")
    with pytest.raises(unidev.InvalidArgumentError, match="expected a JSON object with format"):
        Graph.load(str(path))


def test_cli_show(tmp_path, capsys):
    _graph().save(str(tmp_path / "g.json"))
    assert main(["graph", "show", str(tmp_path / "g.json"), "--optimize",
                 "--draw", str(tmp_path / "g.dot")]) == 0
    out = capsys.readouterr().out
    assert "conv2d_bias_act" in out and "key " in out
    assert (tmp_path / "g.dot").read_text().startswith('digraph "blk"')
    missing = argparse.Namespace(file=str(tmp_path / "missing.json"), optimize=False,
                                 training=False, draw=None)
    assert cmd_graph(missing) == 2  # (main() builds its parser once per process)
