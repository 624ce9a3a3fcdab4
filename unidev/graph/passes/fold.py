"""Constant folding: nodes whose inputs are all constants become constants (via the reference)."""

from __future__ import annotations

import math

from ..evaluate import run_node
from ..ir import Graph

__all__ = ["run", "MAX_ELEMENTS"]

# folding must not blow a small constant up into a huge one (expand, fill of a big shape)
MAX_ELEMENTS = 1 << 20


def run(g: Graph) -> int:
    folded = 0
    targets = {o.updates for n in g.nodes for o in n.outputs if o.updates is not None}
    for n in g.order():
        if any(o in targets for o in n.outputs):
            continue  # updated in place later: a constant cannot be
        if any(v is not None and v.kind != "const" for v in n.inputs):
            continue
        if any(o.updates is not None for o in n.outputs):
            continue
        if any(isinstance(d, str) for o in n.outputs for d in o.shape):
            continue
        if sum(math.prod(o.shape) for o in n.outputs) > MAX_ELEMENTS:
            continue
        results = run_node(n, [g.consts[v] if v is not None else None for v in n.inputs])
        for o, r in zip(n.outputs, results, strict=True):
            g.replace(o, g.const(r))
        g.remove(n)
        folded += 1
    if folded:
        from . import dce
        dce.run(g)
    return folded
