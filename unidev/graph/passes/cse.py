"""Common-subexpression elimination: one node per (op, attributes, inputs); equal constants."""

from __future__ import annotations

from ..canonical import const_hash
from ..ir import Graph, type_str

__all__ = ["run"]


def run(g: Graph) -> int:
    """Merge duplicate constants and nodes (never one that updates an input in place)."""
    merged = 0
    by_content = {}
    for v, data in list(g.consts.items()):
        k = (type_str(v), const_hash(data))
        if k in by_content:
            g.replace(v, by_content[k])
            del g.consts[v]
            merged += 1
        else:
            by_content[k] = v
    seen = {}
    # a value updated in place later keeps its own storage: merging it would make the update
    # write the other node's result (and leave the update pointing at a removed value)
    targets = {o.updates for n in g.nodes for o in n.outputs if o.updates is not None}
    for n in g.order():
        if any(o.updates is not None or o in targets for o in n.outputs):
            continue
        k = (n.op, tuple((a, repr(b)) for a, b in n.attrs.items()), tuple(map(id, n.inputs)),
             tuple(type_str(o) for o in n.outputs))
        first = seen.setdefault(k, n)
        if first is not n:
            for old, new in zip(n.outputs, first.outputs, strict=True):
                g.replace(old, new)
            g.remove(n)
            merged += 1
    return merged
