"""Per-layer conv algorithms in compiled plans: unidev.algorithms selectors applied to a graph."""

from __future__ import annotations

from typing import Any

from .ir import Graph, Node

_FORWARD = ("conv2d", "conv2d_bias_act")  # the fused op takes conv2d's selector


def _layer(n: Node, index: int, plugin: str) -> Any:
    from ..algorithms import Layer

    a = n.attrs
    if n.op == "conv2d_backward_input":
        x, w = tuple(a["input_shape"]), n.inputs[1].shape
    elif n.op == "conv2d_backward_weight":
        x, w = n.inputs[1].shape, tuple(a["weight_shape"])
    else:
        x, w = n.inputs[0].shape, n.inputs[1].shape
    return Layer(name=n.name, index=index, in_channels=int(x[1]), out_channels=int(w[0]),
                 kernel=(int(w[2]), int(w[3])), stride=tuple(a["stride"]),
                 padding=tuple(a["padding"]), dilation=tuple(a["dilation"]),
                 groups=int(a["groups"]), dtype=n.inputs[0].dtype, device=plugin,
                 bias=n.op in _FORWARD and len(n.inputs) > 2 and n.inputs[2] is not None,
                 input_shape=tuple(int(d) for d in x))


def choose(graph: Graph, selector: Any, plugin: str) -> Graph:
    """A copy of `graph` whose conv nodes carry the algorithm `selector` picks for each, as
    unidev.torch.swap_backend takes it: one selector for every direction or {"conv2d": s,
    "conv2d_backward_input": s2, ...} (conv2d's also serves conv2d_bias_act); a list names one
    algorithm per node of that op in graph order; "autotune" times each node's exact
    configuration (persisted). Raises unidev.algorithms.AlgorithmError naming the node."""
    from .. import algorithms as ua
    from ..algorithms.catalog import custom

    g = graph.copy()
    for op, sel in ua.directions(selector).items():
        nodes = [n for n in g.order() if n.op == op or (op == "conv2d" and n.op in _FORWARD)]
        if not nodes:  # e.g. the gradients of an inference graph
            continue
        layers = [_layer(n, i, plugin) for i, n in enumerate(nodes)]
        for n, layer, name in zip(nodes, layers, ua.resolve(sel, layers, op, plugin), strict=True):
            if custom(op, name) is not None:
                raise ua.AlgorithmError(f"{layer}: {name!r} is a Python composite, which runs in "
                                        "eager swaps only, not inside a compiled plan")
            n.attrs["algorithm"] = ua.autotune(layer, op) if name == "autotune" else name
    return g
