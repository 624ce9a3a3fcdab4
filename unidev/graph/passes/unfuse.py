"""Unfusing: a tier-4 node back into op-set ops, for a device without its kernel."""

from __future__ import annotations

import numpy as np

from ..ir import Graph, Node, Value

__all__ = ["expand", "activation"]

_COMPARE = ("eq", "ne", "lt", "le", "gt", "ge")


def activation(g: Graph, v: Value, act: str) -> Value:
    """act(v) as op-set nodes (opset.ACTIVATIONS)."""
    if act == "none":
        return v
    if act == "silu":
        return g.call("mul", v, g.call("sigmoid", v))
    if act in ("gelu", "gelu_tanh"):
        return g.call("gelu", v, approximate="tanh" if act == "gelu_tanh" else "none")
    return g.call(act, v)


def _token(g: Graph, tok: str, args: list[Value], dtype: str) -> Value:
    from ...contract import opset
    if tok == "silu":
        return activation(g, args[0], "silu")
    if tok in _COMPARE:
        return g.call("cast", g.call(tok, *args), dtype=dtype)
    if tok == "where":
        a, b, c = args
        cond = g.call("ne", c, g.const(np.zeros((), dtype)))
        return g.call("where", a, b, cond)
    op, attrs = opset.PROGRAM_SOURCES[tok]
    return g.call(op, *args, **attrs)


def _program(g: Graph, n: Node) -> list[Value]:
    from ...core.program import parse_program, run
    xs = n.inputs
    dtype = n.outputs[0].dtype
    s = n.targets[0] if n.targets and n.targets[0] is not None else xs[0].shape
    prog = parse_program(n.attrs["program"], len(xs), len(n.outputs))
    outs = run(prog, xs, lambda v: g.const(np.array(v, dtype)),
               lambda tok, args: _token(g, tok, args, dtype))
    result = []
    for k in range(len(n.outputs)):
        v = outs[k]
        if v.shape != tuple(s):  # an output that does not depend on every input
            v = g.call("expand", v, shape=tuple(s))
        if n.attrs["reduce"] != "none":
            v = g.call(n.attrs["reduce"], v, axes=n.attrs["reduce_axes"])
        result.append(v)
    return result


def expand(g: Graph, n: Node) -> None:
    """Replace tier-4 node `n` in `g` by the op-set nodes it stands for."""
    if n.op == "elementwise_program":
        new = _program(g, n)
    elif n.op == "conv2d_bias_act":
        x, w, bias, res = n.inputs
        attrs = {k: v for k, v in n.attrs.items() if k != "activation"}
        y = g.call("conv2d", x, w, bias, **attrs)
        if res is not None:
            y = g.call("add", y, res)
        new = [activation(g, y, n.attrs["activation"])]
    elif n.op == "gemm_bias_act":
        a, b, bias, res = n.inputs
        y = g.call("gemm", a, b, bias, alpha=n.attrs["alpha"])
        if res is not None:
            y = g.call("add", y, res)
        new = [activation(g, y, n.attrs["activation"])]
    else:
        raise ValueError(f"node '{n.name}' ({n.op}): not a fused op")
    for old, v in zip(n.outputs, new, strict=True):
        g.replace(old, v)
    g.remove(n)
