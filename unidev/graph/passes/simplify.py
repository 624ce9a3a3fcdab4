"""Algebraic simplification: identities (x*1, x+0, ...), view chains, relu after max-pool."""

from __future__ import annotations

import numpy as np

from ..ir import VIEW_OPS, Graph, Node, Value

__all__ = ["run"]


def _const_all(g: Graph, v: Value | None, value: float) -> bool:
    return v is not None and v.kind == "const" and bool(np.all(g.consts[v] == value))


def _identity(g: Graph, n: Node) -> Value | None:
    """The input `n` returns unchanged, if it is an identity on it."""
    a = n.inputs[0] if n.inputs else None
    out = n.outputs[0] if n.outputs else None
    if out is None or a is None:
        return None

    def same(v: Value | None) -> bool:  # the identity must not broadcast or cast the operand
        return v is not None and v.shape == out.shape and v.dtype == out.dtype
    b = n.inputs[1] if len(n.inputs) > 1 else None
    if n.op in ("add", "sub") and same(a) and (_const_all(g, b, 0) or n.attrs["alpha"] == 0):
        return a
    if n.op == "add" and same(b) and _const_all(g, a, 0) and n.attrs["alpha"] == 1:
        return b
    if n.op in ("mul", "div", "pow") and same(a) and _const_all(g, b, 1):
        return a
    if n.op == "mul" and same(b) and _const_all(g, a, 1):
        return b
    if n.op in ("reshape", "expand", "cast") and same(a):
        return a
    if n.op == "transpose" and n.attrs["perm"] == tuple(range(a.ndim)):
        return a
    if n.op == "neg" and a.kind == "node" and a.producer.op == "neg":
        return a.producer.inputs[0]
    if n.op in ("relu", "abs") and a.kind == "node" and a.producer.op == n.op:
        return a  # idempotent
    if n.op == "relu" and a.kind == "node" and a.producer.attrs.get("activation") == "relu":
        return a
    return None


def _collapse_views(g: Graph, n: Node) -> bool:
    """transpose(transpose(x)) -> one transpose; reshape(reshape(x)) -> one reshape."""
    a = n.inputs[0] if n.inputs else None
    if n.op not in ("transpose", "reshape") or a is None or a.kind != "node" \
            or a.producer.op != n.op:
        return False
    inner = a.producer
    if n.op == "transpose":
        attrs = {"perm": tuple(inner.attrs["perm"][p] for p in n.attrs["perm"])}
    else:
        attrs = {"shape": n.outputs[0].shape}
    new = g.node(n.op, [inner.inputs[0]], attrs)
    g.replace(n.outputs[0], new.outputs[0])
    g.remove(n)
    return True


def _relu_after_pool(g: Graph, n: Node, uses) -> bool:
    """max_pool2d(relu(x)) -> relu(max_pool2d(x)): max and relu commute, and the pool's output
    is smaller (SOL's example). Only when the relu and the pool's indices have no other use."""
    if n.op != "max_pool2d":
        return False
    r = n.inputs[0]
    if r.kind != "node" or r.producer.op != "relu" or len(uses.get(r, [])) != 1 \
            or uses.get(n.outputs[1]) or n.outputs[1] in g.outputs or r in g.outputs:
        return False
    pool = g.node("max_pool2d", [r.producer.inputs[0]], dict(n.attrs))
    relu = g.node("relu", [pool.outputs[0]])
    g.replace(n.outputs[0], relu.outputs[0])
    g.replace(n.outputs[1], pool.outputs[1])
    g.remove(n)
    return True


def _updated_storage(g: Graph) -> set[Value]:
    """Values whose storage some node updates in place (every version of it, and views)."""
    out: set[Value] = set()
    for n in g.nodes:
        for o in n.outputs:
            v = o
            while v is not None:
                out.add(v)
                v = v.updates
    return out


def run(g: Graph) -> int:
    changed = 0
    progress = True
    while progress:  # sweeps until nothing changes (a rewrite can enable another)
        progress = False
        uses = g.uses()  # may go stale within a sweep: rewrites only add nodes or drop n
        updated = _updated_storage(g)
        targets = {o.updates for m in g.nodes for o in m.outputs if o.updates is not None}
        removed: set[Node] = set()
        for n in g.order():
            if n in removed:
                continue
            x = _identity(g, n)
            if n.op == "copy" and n.inputs[0] not in updated:
                x = n.inputs[0]  # values are immutable unless updated in place
            if x is not None and not any(o.updates is not None for o in n.outputs) \
                    and n.outputs[0] not in targets:  # an updated value keeps its own storage
                y = n.outputs[0]
                readers = [(m, i) for m in g.nodes for i, v in enumerate(m.inputs) if v is y]
                outs = [k for k, v in enumerate(g.outputs) if v is y]
                g.replace(y, x)
                if updated and (x in updated or x.kind == "node" and x.producer.op in VIEW_OPS) \
                        and not g.acyclic():  # its readers would now have to run before an
                    for m, i in readers:      # update they follow: keep n
                        m.inputs[i] = y
                    for k in outs:
                        g.outputs[k] = y
                    continue
                g.remove(n)
                removed.add(n)
            elif not (_collapse_views(g, n) or _relu_after_pool(g, n, uses)):
                continue
            removed.add(n)
            progress = True
            changed += 1
    if changed:
        from . import dce
        dce.run(g)
    return changed
