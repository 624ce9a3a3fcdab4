"""Dead-code elimination: drop nodes and constants nothing live reads."""

from __future__ import annotations

from ..ir import Graph

__all__ = ["run"]


def run(g: Graph) -> int:
    """Remove nodes whose results reach no output and update no graph input; returns the count."""
    live = set(g.outputs) | set(g.effects())
    keep = set()
    stack = [v.producer for v in live if v.kind == "node"]
    while stack:
        n = stack.pop()
        if n in keep:
            continue
        keep.add(n)
        stack.extend(v.producer for v in n.inputs if v is not None and v.kind == "node")
    dead = [n for n in g.nodes if n not in keep]
    for n in dead:
        g.remove(n)
    used = set(g.outputs) | {v for n in g.nodes for v in n.inputs}
    for v in [c for c in g.consts if c not in used]:
        del g.consts[v]
    return len(dead)
