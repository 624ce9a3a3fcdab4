"""Canonical form of a graph: structural hashes, a name- and order-independent key."""

from __future__ import annotations

import hashlib
import heapq
import weakref

from .ir import Graph, Node, Value, type_str

__all__ = ["key", "canonical_names", "canonical_order", "const_hash"]


def _h(*parts: object) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()


_HASHED: dict[int, tuple[weakref.ref, str]] = {}


def const_hash(data) -> str:
    """Content hash of a constant (dtype, shape, bytes), remembered per graph-owned array
    (read-only, so it cannot change): keying a graph with big weights again costs nothing."""
    known = _HASHED.get(id(data))
    if known is not None and known[0]() is data:
        return known[1]
    h = hashlib.sha256(f"{data.dtype.str}{data.shape}".encode())
    h.update(data.tobytes(order="C"))
    digest = h.hexdigest()[:16]
    if not data.flags.writeable:
        key = id(data)
        _HASHED[key] = (weakref.ref(data, lambda _: _HASHED.pop(key, None)), digest)
    return digest


def attr_items(node: Node) -> list[tuple[str, object]]:
    """The node's attributes that differ from the op's defaults, in schema order."""
    schema = node.schema
    if schema is None:
        return list(node.attrs.items())
    out = []
    for a in schema.attrs:
        v = node.attrs[a.name]
        default = tuple(a.default) if isinstance(a.default, list) else a.default
        if v != default or type(v) is not type(default):
            out.append((a.name, v))
    return out


def _hashes(g: Graph) -> tuple[dict[Value, str], dict[Node, str]]:
    vh: dict[Value, str] = {}
    nh: dict[Node, str] = {}
    for i, v in enumerate(g.inputs):
        vh[v] = _h("in", i, type_str(v))
    for v, data in g.consts.items():
        vh[v] = _h("const", type_str(v), const_hash(data))
    for n in g.order():
        nh[n] = _h(n.op, attr_items(n), [vh[v] if v is not None else "-" for v in n.inputs],
                   [type_str(o) for o in n.outputs])
        for o in n.outputs:
            vh[o] = _h(nh[n], o.index, o.updates is not None)
    return vh, nh


def canonical_order(g: Graph) -> list[Node]:
    """A topological order that depends only on structure: ready nodes by smallest hash."""
    _, nh = _hashes(g)
    deps = g.deps()
    users: dict[Node, list[Node]] = {n: [] for n in g.nodes}
    for n, ds in deps.items():
        for d in ds:
            users[d].append(n)
    count = {n: len(ds) for n, ds in deps.items()}
    pos = {n: i for i, n in enumerate(g.nodes)}
    ready = [(nh[n], i, n) for i, n in enumerate(g.nodes) if not count[n]]
    heapq.heapify(ready)
    out = []
    while ready:
        _, _, n = heapq.heappop(ready)
        out.append(n)
        for u in users[n]:
            count[u] -= 1
            if not count[u]:
                heapq.heappush(ready, (nh[u], pos[u], u))
    return out


def canonical_names(g: Graph, order: list[Node]) -> dict[Value, str]:
    names = {v: f"i{k}" for k, v in enumerate(g.inputs)}
    consts = 0
    values = 0
    for n in order:
        for v in n.inputs:
            if v is not None and v.kind == "const" and v not in names:
                names[v] = f"c{consts}"
                consts += 1
        for o in n.outputs:
            names[o] = f"v{values}"
            values += 1
    for v in g.consts:  # unused constants still have a name
        if v not in names:
            names[v] = f"c{consts}"
            consts += 1
    return names


def key(g: Graph) -> str:
    """The graph's identity: sha256 of its canonical text (names and node order normalized,
    constants by content hash). Equal for two traces of the same computation."""
    from .dump import text
    order = canonical_order(g)
    return hashlib.sha256(text(g, canonical_names(g, order), order, header=False).encode()) \
        .hexdigest()[:32]
